# Makes `import model` work from tests/ (pytest puts this folder on sys.path).
