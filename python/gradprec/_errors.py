"""gradprec's errors as Python exceptions: each carries the status (the `gradprec` exit
code: 2 bad input, 3 internal) and gradprec's one-line message."""


class GradprecError(Exception):
    """A gradprec call failed. `status` is 2 (bad input) or 3 (internal error); `line` is
    gradprec's own one-line message (for input errors: file:line:column: what)."""

    def __init__(self, status, line):
        super().__init__(line)
        self.status = status
        self.line = line

    def __new__(cls, status=3, line=""):
        if cls is GradprecError:
            cls = BadInputError if status == 2 else InternalError
        return super().__new__(cls)


class BadInputError(GradprecError, ValueError):
    """Status 2: a bad scenario, dump, backend name or argument (nothing was written)."""


class InternalError(GradprecError, RuntimeError):
    """Status 3: a backend call failed, memory ran out, a file could not be written."""
