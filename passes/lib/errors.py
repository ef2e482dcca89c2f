"""Errors raised by passes: they name the pass, and the custom-call or op involved."""

from converter.common.errors import ConverterError, UsageError


class PassError(ConverterError):
    pass


class UnknownPassError(PassError, UsageError):
    """A pass name no pass has: a bad command line."""
