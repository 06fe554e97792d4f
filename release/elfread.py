"""What reading a damaged or hostile ELF file raises, in one tuple for every reader of one.

pyelftools and auditwheel's reading of it take a file's headers at their word: besides
ELFError, a section that is not what its name says (a `.gnu.version_r` of another type) is an
AttributeError, a `.dynamic` linked to section 0 an AssertionError, an offset past 2**63 an
OverflowError, a table cut short a struct.error or an IndexError. Each is the file's damage,
not this program's bug: a reader says "not an ELF file (why)" for it.
"""

from __future__ import annotations

import struct

from elftools.common.exceptions import ELFError

ELF_READ_ERRORS: tuple[type[Exception], ...] = (
    ELFError,
    ValueError,
    OSError,
    EOFError,
    LookupError,  # KeyError, IndexError
    struct.error,
    AssertionError,
    AttributeError,
    OverflowError,
    TypeError,
)
