"""Per-file warnings are printed once per distinct message, with the number of files."""

from __future__ import annotations

from trace_report.present.messages import group_warnings


def test_identical_messages_of_several_files_become_one_line():
    msgs = [f"/data/run/trace{i}.json.gz: no rank in distributedInfo or the file name; assuming rank 0"
            for i in range(9)]
    (line,) = group_warnings(msgs)
    assert line.startswith("no rank in distributedInfo or the file name; assuming rank 0 (9 files: ")
    assert "trace0.json.gz, trace1.json.gz, trace2.json.gz, ..." in line


def test_one_file_and_distinct_messages_stay_as_they_are_in_order():
    msgs = ["a.json: redacted 1 secret-looking metadata value(s): hf_token@metadata.env.HF_TOKEN",
            "a.json: no rank in distributedInfo or the file name; assuming rank 0",
            "b.json: no rank in distributedInfo or the file name; assuming rank 0",
            "something without a file"]
    out = group_warnings(msgs)
    assert out == ["a.json: redacted 1 secret-looking metadata value(s): hf_token@metadata.env.HF_TOKEN",
                   "no rank in distributedInfo or the file name; assuming rank 0 (2 files: a.json, b.json)",
                   "something without a file"]


def test_archive_members_keep_their_member_name():
    msgs = [f"/x/dlrm.tar.gz!worker{i}.json: no rank in distributedInfo or the file name; assuming rank 0"
            for i in range(2)]
    assert group_warnings(msgs) == ["no rank in distributedInfo or the file name; assuming rank 0 "
                                    "(2 files: dlrm.tar.gz!worker0.json, dlrm.tar.gz!worker1.json)"]
