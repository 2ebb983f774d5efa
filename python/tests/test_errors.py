"""Errors are Python exceptions that say what is wrong and what to change: pipeline files
with file:line:column and a help line, dicts by key, missing folders, bad files by path."""

import pytest

import stokehold
from conftest import EVAL, TRAIN


def small_pipeline(**reader):
    return {
        "pipeline": {"batch": 4, "outputs": ["images", "labels"]},
        "op": [
            {"kind": "file_reader", "outputs": ["jpegs", "labels"], **reader},
            {"kind": "decode", "input": "jpegs", "output": "decoded"},
            {"kind": "resize", "input": "decoded", "output": "images", "size": [32, 32]},
        ],
    }


def test_a_bad_pipeline_file_names_file_line_column_and_help(builtin, tmp_path):
    bad = tmp_path / "bad.toml"
    text = TRAIN.read_text().replace('kind = "random_resized_crop"', 'kind = "random_resized_crops"')
    bad.write_text(text)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "random_resized_crops" in l)
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(bad, builtin)
    msg = str(e.value)
    assert msg.startswith(f"{bad}:{line}:8: "), msg
    assert "random_resized_crops" in msg and "\n  help: " in msg, msg
    assert "random_resized_crop" in e.value.help
    assert (e.value.file, e.value.line, e.value.column) == (str(bad), line, 8)
    assert isinstance(e.value, ValueError) and isinstance(e.value, stokehold.Error)


def test_a_toml_syntax_error_is_placed_too(builtin, tmp_path):
    bad = tmp_path / "syntax.toml"
    bad.write_text("[pipeline]\nbatch = = 4\n")
    with pytest.raises(stokehold.PipelineError, match=rf"^{bad}:2:\d+: "):
        stokehold.Pipeline(bad, builtin)


def test_a_bad_dict_names_the_key(builtin):
    d = small_pipeline()
    d["op"][2]["sizee"] = d["op"][2].pop("size")
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(d, builtin)
    msg = str(e.value)
    assert 'pipeline dict, at ["op"][2]["sizee"]' in msg, msg
    assert "help:" in msg and "size" in e.value.help
    d = small_pipeline()
    d["pipeline"]["batch"] = "4"
    with pytest.raises(stokehold.PipelineError, match=r'\["pipeline"\]\["batch"\]'):
        stokehold.Pipeline(d, builtin)
    with pytest.raises(stokehold.PipelineError, match="no pipeline-file form"):
        stokehold.Pipeline({"pipeline": {"batch": None}}, builtin)


def test_a_good_dict_runs_like_a_file(builtin):
    p = stokehold.Pipeline(small_pipeline(), builtin, threads=1, epochs=1)
    b = next(iter(p))
    assert b["images"].shape == (4, 32, 32, 3) and b["images"].dtype == "uint8"
    assert b["images"].layout == "NHWC"


def test_bad_keyword_settings(builtin):
    for kw, match in [({"batch": 0}, "batch = 0"), ({"device": "tpu"}, "not a device"),
                      ({"on_error": "ignore"}, "not a policy"), ({"seed": -1}, "negative")]:
        with pytest.raises(stokehold.PipelineError, match=match):
            stokehold.Pipeline(EVAL, builtin, **kw)
    with pytest.raises(stokehold.PipelineError, match="no such pipeline file"):
        stokehold.Pipeline("no/such/pipeline.toml", builtin)
    with pytest.raises(stokehold.PipelineError, match="reads no data"):
        stokehold.Pipeline(EVAL)


def test_keyword_settings_are_checked_as_a_pipeline_file_is(builtin):
    # The settings schema decides, with the file's ranges and words: threads=0 is one per
    # core there too, and each range is the file's.
    with stokehold.Pipeline(EVAL, builtin, threads=0, epochs=1) as p:
        assert p.threads >= 1
    for kw, match in [({"epochs": 0}, "epochs = 0 is out of range: it must be at least 1"),
                      ({"prefetch": -2}, "prefetch = -2 is out of range"),
                      ({"on_error": "skipp"}, 'did you mean "skip"')]:
        with pytest.raises(stokehold.PipelineError, match=match):
            stokehold.Pipeline(EVAL, builtin, **kw)


def test_a_missing_folder_says_so(tmp_path):
    missing = tmp_path / "not-there"
    with pytest.raises(stokehold.DataError, match=f"data={missing}: no such folder"):
        stokehold.Pipeline(EVAL, missing)
    with pytest.raises(stokehold.DataError) as e:
        stokehold.Pipeline(small_pipeline(root=str(missing)))
    assert str(missing) in str(e.value) and e.value.path == str(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(stokehold.DataError, match="no image files found"):
        stokehold.Pipeline(EVAL, empty)


def damage(folder):
    """Truncates one JPEG to half and writes a text file with a .jpg name; returns both."""
    victim = sorted(folder.glob("*.jpg"))[3]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    fake = folder / "zz_not_an_image.jpg"
    fake.write_text("not a jpeg")
    return victim, fake


# A flat folder has no labels: test_a_flat_folder_warns_that_its_labels_are_missing
# checks that warning; here it is beside the point.
@pytest.mark.filterwarnings("ignore:the data set has no labels:stokehold.DataWarning")
def test_bad_files_are_reported_with_path_and_cause(flat_jpegs):
    truncated, fake = damage(flat_jpegs)
    p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=2, epochs=1)
    batches = list(p)
    skipped = {s.path: s for b in batches for s in b.skipped}
    total = sum(len(b) for b in batches)
    st = p.stats()
    assert set(skipped) == {str(truncated), str(fake)}, skipped
    assert "truncated" in skipped[str(truncated)].cause
    assert skipped[str(truncated)].category == "decode:corrupt"
    assert "not a JPEG or PNG" in skipped[str(fake)].cause
    assert skipped[str(fake)].category == "decode:unknown-format"
    assert total + len(skipped) == p.samples_per_epoch
    assert st["skipped"] == len(skipped) and st["images"] == total
    delivered = {s.path for b in batches for s in b.samples}
    assert not delivered & set(skipped)
    assert all(b.replaced == [] for b in batches)
    # Under on_error="replace" the same files are replaced, not skipped: full batches.
    p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=2, epochs=1, on_error="replace")
    batches = list(p)
    replaced = {s.path for b in batches for s in b.replaced}
    assert replaced == {str(truncated), str(fake)}, replaced
    assert all(b.skipped == [] for b in batches)
    assert sum(len(b) for b in batches) == p.samples_per_epoch


# A flat folder has no labels: test_a_flat_folder_warns_that_its_labels_are_missing
# checks that warning; here it is beside the point.
@pytest.mark.filterwarnings("ignore:the data set has no labels:stokehold.DataWarning")
def test_on_error_fail_raises_a_data_error_with_the_path(flat_jpegs):
    truncated, _ = damage(flat_jpegs)
    p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=2, on_error="fail")
    with pytest.raises(stokehold.DataError) as e:
        for _ in p:
            pass
    # The eval pipeline reads in listing order: the truncated file is the first bad one.
    assert e.value.path == str(truncated) and "truncated" in e.value.cause
    assert str(truncated) in str(e.value)


def test_a_device_that_cannot_be_had_is_a_device_error(builtin):
    # Without a GPU (as in CI), asking for the GPU path is refused with the reason;
    # device="auto" falls back to the CPU and says why.
    with pytest.raises(stokehold.DeviceError, match="GPU unavailable"):
        stokehold.Pipeline(EVAL, builtin, device="cuda:0")
    p = stokehold.Pipeline(EVAL, builtin)
    assert p.device == "cpu" and p.device_reason


def test_every_problem_of_a_pipeline_file_is_reported_at_once(builtin, tmp_path):
    bad = tmp_path / "two.toml"
    text = TRAIN.read_text().replace("size = 224", 'size = "224"')
    text = text.replace("horizontal = 0.5", "horizontal = 0.5\nhorizonal = 0.5")
    bad.write_text(text)
    lines = text.splitlines()
    size_line = lines.index('size = "224"') + 1
    typo_line = lines.index("horizonal = 0.5") + 1
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(bad, builtin)
    errors = e.value.errors
    assert [type(x) for x in errors] == [stokehold.PipelineError] * 2, errors
    assert [(x.file, x.line) for x in errors] == [(str(bad), size_line), (str(bad), typo_line)]
    assert "without quotes" in errors[0].help and "did you mean 'horizontal'" in errors[1].help
    msg = str(e.value)
    assert msg.count("\n  help: ") == 2 and msg.endswith("2 problems found"), msg
    assert (e.value.file, e.value.line) == (str(bad), size_line)
    # One problem: `errors` holds the exception itself.
    bad.write_text(TRAIN.read_text().replace("size = 224", 'size = "224"'))
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(bad, builtin)
    assert e.value.errors == [e.value]


def test_a_dict_pipelines_errors_are_told_in_dict_syntax(builtin):
    d = small_pipeline()
    d["op"][2]["size"] = "32"
    d["pipeline"]["batch"] = "4"
    with pytest.raises(stokehold.PipelineError) as e:
        stokehold.Pipeline(d, builtin)
    assert len(e.value.errors) == 2, str(e.value)
    msg = str(e.value)
    assert '`"size": ' in msg and '`"batch": ' in msg, msg
    assert "size = " not in msg and "batch = " not in msg, msg
    assert 'pipeline dict, at ["op"][2]["size"]' in msg and 'at ["pipeline"]["batch"]' in msg


def test_a_flat_folder_warns_that_its_labels_are_missing(flat_jpegs):
    with pytest.warns(stokehold.DataWarning, match="has no labels.*every label is -1"):
        p = stokehold.Pipeline(EVAL, flat_jpegs, batch=8, threads=1, epochs=1)
    assert {s.label for b in p for s in b.samples} == {-1}
