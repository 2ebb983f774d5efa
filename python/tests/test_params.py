"""Each sample's random parameters come back as plain values: the crop window with the size of
the image it was cut from, and the flip."""

import stokehold
from conftest import TRAIN


def test_crop_and_flip_parameters_are_plain_values(builtin):
    p = stokehold.Pipeline(TRAIN, builtin, batch=8, seed=3, epochs=1, threads=1)
    seen = 0
    for b in p:
        for s in b.samples:
            crop, flip = s.params["crop"], s.params["flip"]
            assert crop["source_height"] > 0 and crop["source_width"] > 0
            assert 0 <= crop["top"] and crop["top"] + crop["height"] <= crop["source_height"]
            assert 0 <= crop["left"] and crop["left"] + crop["width"] <= crop["source_width"]
            assert isinstance(flip["horizontal"], bool) and flip["vertical"] is False
            seen += 1
    assert seen == 64
