"""The error types users see.  Every one of them is reported by the CLI as one message
(no traceback unless --debug) with exit status 1."""


class ConverterError(Exception):
    """Base class for errors about the user's input (bad or unsupported dump, inputs)."""


class UsageError(ConverterError):
    """A bad command line (an unknown pass name, an unknown file extension): exit 2."""
class ConverterWarning(UserWarning):
    """Something the user should know about their input that does not stop the conversion
    (an attribute kept as raw text under --allow-unknown-attributes, ...).  The CLI prints
    the message alone on stderr."""
