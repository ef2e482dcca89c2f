"""Errors raised by passes: they name the pass, and the custom-call or op involved."""

from converter.common.errors import ConverterError, UsageError


class PassError(ConverterError):
    # Set where the failing verification also covered a module that had not verified
    # before the pipeline (run_pipeline's verified_input=False): the input may be at fault.
    input_unverified: bool = False


class UnknownPassError(PassError, UsageError):
    """A pass name no pass has: a bad command line."""
