"""Structured logging through the host's ``tracing``, with the plugin name
and the reconcile key attached by the host::

    from kubewasm_guest import log
    log.info("applied", replicas=3)
"""

from . import _backend


def _emit(level: str, message: str, fields: dict) -> None:
    _backend.log(level, message, list(fields.items()))


def debug(message: str, **fields) -> None:
    _emit("debug", message, fields)


def info(message: str, **fields) -> None:
    _emit("info", message, fields)


def warn(message: str, **fields) -> None:
    _emit("warn", message, fields)


def error(message: str, **fields) -> None:
    _emit("error", message, fields)
