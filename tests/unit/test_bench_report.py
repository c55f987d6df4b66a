"""``make bench-report`` (benchmarks/harness/report.py): the project's figures, RESULTS.md and its
measurement tables, regenerated from the committed rows."""

from __future__ import annotations

import pytest

from benchmarks.harness import report
from rllib_ext.compare.rows import append_row
from tests.unit.compare.test_report import race_rows, row


def test_replace_generated_needs_the_markers():
    text = f"intro\n{report.BEGIN}\nold\n{report.END}\nnotes\n"
    assert report.replace_generated(text, "new", "R.md") == f"intro\n{report.BEGIN}\nnew\n{report.END}\nnotes\n"
    with pytest.raises(ValueError, match="R.md has no"):
        report.replace_generated("no markers", "new", "R.md")


def test_main_regenerates_figures_and_table(tmp_path):
    results, figures, md = tmp_path / "results", tmp_path / "docs" / "results", tmp_path / "RESULTS.md"
    for r in race_rows(target=100.0):
        append_row(str(results / "bench" / "r1.jsonl"), r)
    md.write_text(f"# Results\n\n{report.BEGIN}\n{report.END}\n\n## Notes\n")
    argv = ["--results-dir", str(results), "--figures-dir", str(figures), "--results-md", str(md)]
    assert report.main(argv) == 0
    png = figures / "bench_CartPole-v1.png"
    assert png.stat().st_size > 1000
    text = md.read_text()
    assert text.startswith("# Results") and text.endswith("## Notes\n")
    assert "docs/results/bench_CartPole-v1.png" in text and "| A | 5 |" in text
    first = text
    assert report.main(argv) == 0 and md.read_text() == first  # regenerating changes nothing


def test_main_reports_a_bad_row_with_file_and_line(tmp_path, capsys):
    results = tmp_path / "results" / "bench"
    results.mkdir(parents=True)
    (results / "r1.jsonl").write_text(row().to_json() + "\n{}\n")
    md = tmp_path / "RESULTS.md"
    md.write_text(f"{report.BEGIN}\n{report.END}\n")
    argv = ["--results-dir", str(tmp_path / "results"), "--figures-dir", str(tmp_path / "f"), "--results-md", str(md)]
    assert report.main(argv) == 1
    assert "r1.jsonl:2: bad row" in capsys.readouterr().err


def test_measurement_rows_live_apart_and_get_median_tables(tmp_path):
    """Throughput/scaling rows (results/measurements/) are not learning curves: the learning-curve
    reader skips them and the report tables their medians per line."""
    import json

    results = tmp_path / "results"
    for r in race_rows(target=100.0):
        append_row(str(results / "bench" / "r1.jsonl"), r)
    scale = results / "measurements" / "blackbox_scale"
    scale.mkdir(parents=True)
    lines = [
        {"benchmark": "blackbox_scale", "algorithm": "DFD_EXT", "runners": 8, "worker_utilization": u, "date": "2026"}
        for u in (0.9, 0.99, 0.95)
    ]
    (scale / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    from rllib_ext.compare.rows import read_all, read_measurements

    assert len(read_all(str(results))) == len(race_rows(target=100.0))
    measurements = read_measurements(str(results))
    assert len(measurements) == 3
    table = report.measurement_tables(measurements)
    assert "| DFD_EXT | 8 | 0.950 |" in table and table.rstrip().endswith("| 3 |")


def test_every_measurement_table_groups_its_rows(tmp_path):
    """Each measurement benchmark's key fields are plain values (a table line per distinct key)."""
    for benchmark, spec in report.MEASUREMENT_TABLES.items():
        rows = [
            {
                "benchmark": benchmark,
                **{k: f"{k}-{i % 2}" for k in spec["keys"]},
                **{f: 1.0 + i for f, _, _ in spec["values"]},
            }
            for i in range(4)
        ]
        table = report.measurement_tables(rows)
        lines = [line for line in table.splitlines() if line.startswith(f"| {spec['keys'][0]}-")]
        assert len(lines) == 2 and all(line.endswith("| 2 |") for line in lines), (benchmark, table)
