"""``make bench-report`` (benchmarks/harness/report.py): the project's figures, RESULTS.md and its
measurement tables, regenerated from the committed rows."""

from __future__ import annotations

import pytest

from benchmarks.harness import report
from rllib_ext.compare.rows import append_row, read_all
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
    argv += ["--docs-dir", str(tmp_path / "docs")]
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
    assert report.main([*argv, "--docs-dir", str(tmp_path / "docs")]) == 1
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


def _results_page(tmp_path, block: str):
    results, docs, md = tmp_path / "results", tmp_path / "docs", tmp_path / "benchmarks" / "RESULTS.md"
    for r in race_rows(target=100.0):
        append_row(str(results / "bench" / "r1.jsonl"), r)
    md.parent.mkdir()
    md.write_text(f"{report.BEGIN}\n{report.END}\n")
    page = docs / "algorithms" / "a.md"
    page.parent.mkdir(parents=True)
    page.write_text(f"## Results\n\nProse.\n\n{block}\n\nMore prose.\n")
    argv = ["--results-dir", str(results), "--figures-dir", str(tmp_path / "f"), "--results-md", str(md)]
    return page, [*argv, "--docs-dir", str(docs)], md


def test_main_regenerates_the_results_blocks_of_the_docs_pages(tmp_path):
    page, argv, md = _results_page(tmp_path, "<!-- results:begin bench/r1 -->\nhand-copied\n<!-- results:end -->")
    assert report.main(argv) == 0
    text = page.read_text()
    assert text.startswith("## Results\n\nProse.\n\n<!-- results:begin bench/r1 -->\nRace [`r1`]")
    assert text.endswith("<!-- results:end -->\n\nMore prose.\n") and "hand-copied" not in text
    assert "(../../benchmarks/RESULTS.md#race-bench-r1)" in text and 'id="race-bench-r1"' in md.read_text()
    assert "| P(A > B) | 1.00 [1.00, 1.00], separated |" in text
    rows = read_all(str(tmp_path / "results"))
    assert report.results_pages(rows, str(tmp_path / "docs"), str(md)) == []  # up to date
    page.write_text(text.replace("| A | 5 |", "| A | 6 |"))  # a hand edit
    assert report.results_pages(rows, str(tmp_path / "docs"), str(md)) == [str(page)]
    assert report.main(argv) == 0 and page.read_text() == text


def test_a_results_block_of_an_unknown_race_or_entry_fails_and_writes_nothing(tmp_path, capsys):
    for case, block, error in (
        ("race", "<!-- results:begin bench/r9 -->\n<!-- results:end -->", "bench/r9: no such race"),
        ("entry", "<!-- results:begin bench/r1 A,Z -->\n<!-- results:end -->", "has no entry Z"),
        ("focus", "<!-- results:begin bench/r1 Z:A,B -->\n<!-- results:end -->", "has no entry Z"),
    ):
        page, argv, md = _results_page(tmp_path / case, block)
        before = md.read_text(), page.read_text()
        assert report.main(argv) == 1
        assert error in capsys.readouterr().err and (md.read_text(), page.read_text()) == before
