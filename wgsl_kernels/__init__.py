"""Every WGSL compute shader webgrad runs, one concern per file. Shipped as
package data and read with ``importlib.resources`` natively and in Pyodide."""
