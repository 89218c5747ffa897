"""The main job and the notebook run end to end: the CLI's quickstart on the shared session,
the notebook in its own kernel (and its own Spark driver), as a user would run them."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from segmentlake.cli.main import main
from segmentlake.cli.quickstart import DATASOURCE
from segmentlake.lake import Lake

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "quickstart.ipynb"


@pytest.mark.spark
def test_quickstart_tells_the_whole_story(
    spark: object, warehouse: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["--warehouse", warehouse, "quickstart", "--days", "4", "--rows-per-day", "400"]) == 0
    )
    out = capsys.readouterr().out
    for expected in (
        "1. batch ingestion",
        "2. late data",
        "3. 2024-01-03 re-ingested",
        "SUCCESS",
        "visible timeline",
        "SQL: edits per day",
        "SQL: top channels",
    ):
        assert expected in out
    lake = Lake(spark, warehouse)  # type: ignore[arg-type]
    per_day = {
        str(r.day): r.edits
        for r in lake.read(DATASOURCE)
        .selectExpr("CAST(__time AS DATE) AS day", "edits")
        .groupBy("day")
        .sum("edits")
        .withColumnRenamed("sum(edits)", "edits")
        .collect()
    }
    # 400 a day; 40 late edits on Jan 2 and Jan 4; Jan 3 overwritten with 200.
    assert per_day == {"2024-01-01": 400, "2024-01-02": 440, "2024-01-03": 200, "2024-01-04": 440}
    assert main(["--warehouse", warehouse, "tasks", DATASOURCE]) == 0
    assert "3 task(s) of wikipedia" in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_notebook_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEGMENTLAKE_WAREHOUSE", str(tmp_path / "warehouse"))
    monkeypatch.setenv("SEGMENTLAKE_SPARK_MASTER", "local[2]")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3").execute(cwd=str(tmp_path))
    outputs = "\n".join(
        o.get("text", "") for cell in notebook.cells for o in cell.get("outputs", [])
    )
    assert "SUCCESS" in outputs
    assert "maxParseExceptions=0" in outputs  # the bad-rows cell showed the failure
    assert "unparseable=1" in outputs  # ... and then counted the skipped row
