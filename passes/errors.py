"""Errors raised by passes: they name the pass, and the custom-call or op involved."""

from converter.errors import ConverterError


class PassError(ConverterError):
    pass
