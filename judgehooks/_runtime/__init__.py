"""The process runtime: the judgehooks loop, tracked work, drain, exit and fork (see `runtime`)."""

from .lifespan import adrain, drain, lifespan, stats
from .core import Drainable, Runtime, runtime

__all__ = ("Drainable", "Runtime", "adrain", "drain", "lifespan", "runtime", "stats")
