"""Hatch build hook: compiles tokenmill/filters/word_scan.c into the shared library that
tokenmill/filters/word_scan.py loads with ctypes (no Python API: any C compiler, `CC` or cc).

Editable installs (`uv sync`) leave the library beside its source; wheels include it. It is
written under another name and renamed: processes that loaded the previous one keep theirs.
"""

import os
import shlex
import subprocess
import tempfile

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "tokenmill/filters/word_scan.c"
# Not a name Python's import system takes for an extension module ("*.so"): the package's
# modules are walked (tests/test_bad_files.py) and it is none.
LIBRARY = "tokenmill/filters/libword_scan.so.1"


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        source, library = (os.path.join(self.root, path) for path in (SOURCE, LIBRARY))
        compiler = shlex.split(os.environ.get("CC", "cc"))
        handle, partial = tempfile.mkstemp(dir=os.path.dirname(library), suffix=".partial")
        os.close(handle)
        try:
            command = [*compiler, "-O2", "-shared", "-fPIC", "-o", partial, source]
            subprocess.run(command, check=True)
            os.replace(partial, library)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if version != "editable":
            build_data["force_include"][library] = LIBRARY
