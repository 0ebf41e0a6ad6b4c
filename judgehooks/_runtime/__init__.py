"""The process runtime: the judgehooks loop, tracked work, drain, exit and fork (see `runtime`)."""

from .core import Drainable, Runtime, runtime
from .lifespan import adrain, drain, lifespan, stats

__all__ = ("Drainable", "Runtime", "adrain", "drain", "lifespan", "runtime", "stats")
