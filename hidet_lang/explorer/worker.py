"""The child process of one job: `python -m hidet_lang.explorer.worker JOB.json RESULT.json`. It runs the job in
the job's folder and writes the result (or the error at its line) as JSON; the server gives it its time and memory
limits and stops it when it runs past them. Shortly before the time limit it prints where Python is (faulthandler)
so that the server can name the line of a program that never finishes."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from pathlib import Path
from typing import Any

from hidet_lang.explorer.jobs import compile_job, run_job
from hidet_lang.explorer.program import Workspace
from hidet_lang.explorer.stages import workspace_dumps

TRACEBACK_MARGIN_S = 1.0


def main(job_path: str, result_path: str) -> None:
    """Run the job in `job_path` and write its result to `result_path`."""
    job: dict[str, Any] = json.loads(Path(job_path).read_text())
    workspace = Workspace(Path(job_path).parent)
    os.environ["HIDET_LANG_DUMP_IR"] = str(workspace.dumps)
    faulthandler.enable()
    faulthandler.dump_traceback_later(max(job.get("timeout", 30) - TRACEBACK_MARGIN_S, 0.5), exit=False)
    try:
        result = {"ok": True, **(compile_job if job["action"] == "compile" else run_job)(workspace, job)}
    except Exception as error:  # every error of the user's program goes back to the page, at its line
        result = {"ok": False, "error": workspace.locate(error).as_json()}
        if job["action"] == "compile":
            result["ir"] = workspace_dumps(workspace)
    faulthandler.cancel_dump_traceback_later()
    Path(result_path).write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:3])
