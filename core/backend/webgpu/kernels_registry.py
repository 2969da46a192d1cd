"""Imports every module that registers launchers for hand-written kernels."""
from . import movement  # noqa: F401
from . import reduce  # noqa: F401
from . import matmul  # noqa: F401
from . import index  # noqa: F401
from . import optim  # noqa: F401
from . import softmax  # noqa: F401
from . import layer_norm  # noqa: F401
from . import scan  # noqa: F401
from . import conv  # noqa: F401
from . import pooling  # noqa: F401
