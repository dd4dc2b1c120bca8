"""Issue 16 §2 in the Tiers sidebar (a real JupyterLab, headless chromium): a job's
``--checkpoint-to`` upload shows in its row, ``uploading 45 % (1.2 of 2.7 GB)`` while it runs,
then the checkpoint's URI. The upload's record is written into the server's registry the way the
uploading process writes it (checkpoint_upload.py), so no S3 server is needed here; the server
picks the change up on its registry scan and pushes it over the events websocket."""

from __future__ import annotations

import time
from typing import Any

import pytest
from playwright.sync_api import expect

from jupyter_tiers.config.registry import JobRecord, Registry
from jupyter_tiers.data.handoff import encode_detail, with_upload

from .conftest import UI_TIMEOUT_MS, Lab
from .test_sidebar import SIDEBAR_ID, no_page_errors, tiers_lab  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.cluster]
SHARED_LAB = True  # nothing here looks at another module's jobs (conftest.lab)
URI = "s3://team-ckpt/jt/side-up/990016/ckpt-000100/"


def test_the_rows_upload_progress_then_its_uri(page: Any, tiers_lab: Lab) -> None:  # noqa: F811
    registry = Registry(tiers_lab.registry)
    detail = encode_detail("/ckpt", "/ckpt/ckpt-000100")
    record = JobRecord(profile="box", tier="slurm", job_id="990016", name="side-up", jobdir="/nonexistent",
                       world_size=1, state="COMPLETED", spec={"checkpoint_to": "store"},
                       submitted_at=time.time(),
                       detail=with_upload(detail, {"state": "uploading", "uri": URI.rstrip("/"),
                                                   "sent": 1_215_000_000, "total": 2_700_000_000}))
    registry.add(record)
    try:
        page.goto(f"{tiers_lab.url}/lab?reset&token={tiers_lab.token}")
        page.locator(f'.jp-SideBar [data-id="{SIDEBAR_ID}"]').click()
        row = page.locator(f'#{SIDEBAR_ID} .jt-side-row[data-key="{record.key}"]')
        upload = row.locator(".jt-side-upload")
        expect(upload).to_have_text(f"uploading 45 % (1.2 of 2.7 GB) to {URI.rstrip('/')}",
                                    timeout=UI_TIMEOUT_MS)
        registry.update(record.key, state="COMPLETED",
                        detail=with_upload(detail, {"state": "done", "uri": URI, "sent": 2_700_000_000,
                                                    "total": 2_700_000_000}))
        expect(upload).to_have_text(f"checkpoint {URI}", timeout=UI_TIMEOUT_MS)
        no_page_errors(page)
    finally:
        registry.remove(record.key)
