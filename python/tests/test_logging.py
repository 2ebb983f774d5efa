"""The library's log lines reach Python's ``logging`` (logger ``"stokehold"``): each bad file
by path and cause, the epochs' summaries; the start's warnings only as DataWarnings."""

import logging

import pytest

import stokehold
from conftest import EVAL
from test_errors import damage


def lines(caplog, level=logging.DEBUG):
    return [r.getMessage() for r in caplog.records if r.name == "stokehold" and r.levelno >= level]


@pytest.mark.filterwarnings("ignore:the data set has no labels:stokehold.DataWarning")
def test_bad_files_are_logged_by_path_and_cause(flat_jpegs, caplog):
    caplog.set_level(logging.WARNING, logger="stokehold")
    truncated, fake = damage(flat_jpegs)
    p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=2, epochs=1)
    batches = list(p)
    assert sum(len(b.skipped) for b in batches) == 2
    warned = lines(caplog, logging.WARNING)
    for bad in (truncated, fake):
        said = [m for m in warned if m.startswith("skipped") and str(bad) in m]
        assert len(said) == 1, (bad, warned)
    assert any("truncated" in m for m in warned), warned
    # The epoch's summary: as its loop ends, at the latest at close().
    p.close()
    warned = lines(caplog, logging.WARNING)
    summaries = [m for m in warned if m.startswith("epoch 0:")]
    assert len(summaries) == 1 and "2 bad samples skipped" in summaries[0], warned


def test_the_starts_warnings_are_python_warnings_not_log_lines(flat_jpegs, caplog):
    caplog.set_level(logging.DEBUG, logger="stokehold")
    with pytest.warns(stokehold.DataWarning, match="no labels"):
        p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=1, epochs=1)
    for _ in p:
        pass
    assert not [m for m in lines(caplog) if "no labels" in m], lines(caplog)


def test_a_level_set_while_running_applies(builtin, caplog):
    caplog.set_level(logging.WARNING, logger="stokehold")
    p = stokehold.Pipeline(EVAL, builtin, batch=16, threads=1, epochs=2)
    for _ in p:
        pass
    caplog.set_level(logging.INFO, logger="stokehold")
    for _ in p:
        pass
    p.close()
    info = [r for r in caplog.records if r.name == "stokehold" and r.getMessage().startswith("epoch 1:")]
    assert info and info[0].levelno == logging.INFO, lines(caplog)
    assert f"{p.samples_per_epoch} images" in info[0].getMessage()


def test_a_command_run_in_the_process_logs_on_stderr_as_its_own(builtin, flat_jpegs, capfd):
    from stokehold._native import _cli_main

    stokehold.Pipeline(EVAL, builtin, batch=16, threads=1).close()  # logging took the log
    args = ["compare", str(EVAL), "--devices", "cpu,cpu", "--batches", "1", "--data"]
    assert _cli_main(["stokehold", *args, str(flat_jpegs)]) == 0
    err = capfd.readouterr().err
    # The start's warning too, which a Pipeline gives as a DataWarning instead.
    assert f"warning: the data set has no labels: {flat_jpegs}" in err, err
