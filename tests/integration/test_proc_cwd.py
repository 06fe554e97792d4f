"""A child started while another thread has moved the whole process into a directory it is
about to remove (auditwheel's reading of a wheel, for a cell built beside another) starts
where the process works, not there: `python -m build` failed at os.getcwd() once the
directory was gone (seen in CI, two cells built side by side)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

from release import proc


def test_a_child_never_starts_in_a_directory_another_thread_moved_the_process_into(
    tmp_path: Path,
) -> None:
    home = Path.cwd()
    elsewhere = tmp_path / "unpacked"
    elsewhere.mkdir()
    moved = threading.Event()
    asked = threading.Event()

    def read_like_auditwheel() -> None:
        with proc.WORKING_DIRECTORY:
            os.chdir(elsewhere)
            moved.set()
            asked.wait(timeout=10)
            # the other thread's child waits for the block: give it time to start wrongly
            time.sleep(0.5)
            os.chdir(home)
            shutil.rmtree(elsewhere)

    reader = threading.Thread(target=read_like_auditwheel)
    reader.start()
    try:
        assert moved.wait(timeout=10)
        asked.set()
        done = proc.run(
            [sys.executable, "-c", "import os; print(os.getcwd())"], env=dict(os.environ)
        )
    finally:
        reader.join()
        os.chdir(home)
    assert done.ok, done.output
    assert done.output.strip() == str(home)
