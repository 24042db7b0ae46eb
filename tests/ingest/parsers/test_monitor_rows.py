"""The one row loop of nvidia-smi dmon and pmon (ingest.engine.parsers.nvidia_smi.monitor_rows):
headers that repeat, the units line, rows that do not fit, and pmon's free-text command."""
from ingest.engine.events import ParseReport
from ingest.engine.parsers.nvidia_smi.monitor_rows import MonitorRows


def _read(tmp_path, text: str, **kw):
    path = tmp_path / "capture.txt"
    path.write_text(text)
    report = ParseReport(format="test")
    table = MonitorRows(**kw)
    return table, list(table.read(path, report)), report


def test_dmon_rows_fill_every_column_and_a_header_may_repeat(tmp_path):
    table, rows, report = _read(
        tmp_path, "0 1 2\n# gpu pwr sm\n# Idx W %\n 0 100 5\n 0 100\n# gpu pwr sm\n 1 90 7\n",
        is_header=lambda words: words[:1] == ["gpu"], command_last=False, before_header=None)
    assert [(loc, row) for loc, _, row in rows] == [("line 4", {"gpu": "0", "pwr": "100", "sm": "5"}),
                                                    ("line 7", {"gpu": "1", "pwr": "90", "sm": "7"})]
    assert [ts for _, ts, _ in rows] == [0, 1]  # no time column: capture order
    assert table.units == []  # the repeated header came without a units line
    assert report.skipped == {"row not matching the header": 2}  # the row before any header, the short row


def test_pmon_commands_keep_their_spaces_and_may_be_missing(tmp_path):
    table, rows, report = _read(
        tmp_path, "1 2 3\n# gpu pid type sm command\n# Idx # C/G % name\n 0 12 C 5 python my script.py\n"
                  " 1 13 C 1\n 1 14\n",
        is_header=lambda words: "gpu" in words and "pid" in words, command_last=True,
        before_header="row before a header")
    assert [row.get("command") for _, _, row in rows] == ["python my script.py", None]
    assert table.units == ["Idx", "#", "C/G", "%", "name"]
    assert report.skipped == {"row before a header": 1, "row not matching the header": 1}


def test_a_row_with_an_unreadable_time_is_skipped(tmp_path):
    _, rows, report = _read(tmp_path, "# time gpu sm\n 12:00:01 0 5\n 12:xx:02 0 6\n",
                            is_header=lambda words: words[:1] == ["time"], command_last=False, before_header=None)
    assert [row["sm"] for _, _, row in rows] == ["5"]
    assert report.skipped == {"row with a bad time": 1}
