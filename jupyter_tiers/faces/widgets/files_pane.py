"""The Files tab of JobView: what the job left, listed and downloaded on request.

The front end sends ``{"kind": "files"}`` (list) and ``{"kind": "download", "name": NAME}``
(``"overwrite": true`` once the user confirmed replacing a local file with other content);
the work runs on a thread (a listing is one remote command, a download is streamed) and the
answers come back as the view's ``files``, ``files_note`` and ``downloads`` traits. Downloads
go to the notebook's directory (the kernel's working directory), never outside it (files.py).
A row says what happened: saved, already up to date (same sha256), saved under a new name
beside a local file with other content, or replaced.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from ...core.errors import TiersError
from ...data.files import download, download_source, file_group, in_display_order

PROGRESS_INTERVAL = 0.25  # seconds between progress updates of one download


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


class FilesPane:
    """The Files tab's kernel side for one view (``view.job``, its traits)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self._listed: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._active: set[str] = set()

    def on_message(self, content: dict[str, Any]) -> bool:
        """Handle a Files-tab message; False if it is not one."""
        kind = content.get("kind")
        if kind == "files":
            threading.Thread(target=self.refresh, name="jt-files", daemon=True).start()
            return True
        if kind == "download":
            name = content.get("name")
            if isinstance(name, str):
                threading.Thread(target=self.download, args=(name,),
                                 kwargs={"overwrite": content.get("overwrite") is True},
                                 name="jt-download", daemon=True).start()
            return True
        return False

    def refresh(self) -> None:
        """List the job's files into ``files`` ([name, size, mtime, group] rows, the job's outputs
        first and jupyter-tiers' own files last: files.GROUPS)."""
        self.view.files_note = "listing…"
        try:
            listed = self.view.job.files()
        except TiersError as exc:
            self.view.files_note = f"cannot list the files: {exc}"
            return
        with self._lock:
            self._listed = {f.name: f for f in listed}
        with self.view.hold_sync():
            self.view.files = [[f.name, f.size, f.mtime, file_group(f.name)]
                               for f in in_display_order(listed)]
            self.view.files_note = "" if listed else "the job left no files (yet)"

    def _set(self, name: str, text: str) -> None:
        with self._lock:
            downloads = {**self.view.downloads, name: text}
        self.view.downloads = downloads

    def download(self, name: str, dest: str | None = None, overwrite: bool = False) -> None:
        """Download one listed file into ``dest`` (default: the notebook's directory); a local
        file with other content is replaced only with ``overwrite``."""
        with self._lock:
            info = self._listed.get(name)
            if info is None or name in self._active:
                return
            self._active.add(name)
        dest = dest or os.getcwd()
        last = [0.0]

        def progress(_name: str, have: int, size: int) -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_INTERVAL:
                last[0] = now
                self._set(name, f"{_mb(have)} of {_mb(size)}")

        job = self.view.job
        try:
            self._set(name, "starting…")
            got = download([info], dest, lambda n, off: job.tier.file_chunks(job.record, n, off),
                           progress, overwrite=overwrite,
                           digest=lambda n: job.tier.file_sha256(job.record, n),
                           source=download_source(job.tier.name, job.record))[0]
            self._set(name, row_text(got.outcome, os.path.relpath(got.path, dest), name))
        except (TiersError, OSError) as exc:
            self._set(name, f"failed: {exc}")
        finally:
            with self._lock:
                self._active.discard(name)


def row_text(outcome: str, local: str, name: str) -> str:
    """A Files row's words for a download's outcome (``local``: where it is, from the notebook's
    directory). The front end offers Replace after ``saved as``."""
    if outcome == "up to date":
        return ("already up to date (same sha256)" if local == name
                else f"already up to date as {local} (same sha256)")
    if outcome == "renamed":
        return f"saved as {local} ({name} here has other content)"
    if outcome == "replaced":
        return f"replaced {local} (its content differed)"
    return f"saved to {local}"
