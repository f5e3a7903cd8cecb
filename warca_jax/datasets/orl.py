"""The ORL (AT&T) faces: 40 people x 10 greyscale images, a small real retrieval task.

Layout: `root/s1/ ... root/s40/`, each with images `1.pgm ... 10.pgm`. Labels are the
folder numbers; there are no cameras, so images 1-5 are camera 0 and 6-10 camera 1.

Protocol: 10 random splits of 20 test and 20 training people (options). Test people's
camera-0 images are all queries and their camera-1 images all gallery (multi-shot: 5
queries against 5 true matches each); the training people's 10 images all train. Camera
rule and multi-shot together make it a real cross-"camera" retrieval task.
"""

from __future__ import annotations

import os
import re

from warca_jax.datasets import base

NAME = "orl"
PATTERN = r"(\d+)\.pgm"
EXAMPLE = "s1/1.pgm (images 1-5 camera 0, 6-10 camera 1)"


def load_orl(root, *, num_test_ids=20, num_train_ids=None, num_splits=10, seed=0) -> base.ImageSet:
    """Reads the ORL faces from `root` holding s1/ ... s40/ (module docstring): an `ImageSet`
    of all images, sorted by person then image number, with `num_test_ids` test people and
    `num_train_ids` training people (None: all the others) per split, the other split
    options `base.protocol_image_set`'s."""
    people = {"num_test_ids": num_test_ids, "num_train_ids": num_train_ids}
    options = base.split_options(num_splits=num_splits, seed=seed, **people)
    root = base.require_layout(root, dataset="ORL faces")
    folders = []
    for entry in os.listdir(root):
        if not os.path.isdir(os.path.join(root, entry)):
            continue  # README and the like.
        match = re.fullmatch(r"s(\d+)", entry)
        if match is None:
            raise ValueError(
                f"ORL faces: unexpected folder {os.path.join(root, entry)}; "
                "expected only person folders s1/, s2/, ..."
            )
        folders.append((int(match.group(1)), entry))
    if not folders:
        raise FileNotFoundError(
            f"ORL faces root {root} must contain person folders s1/, "
            "s2/, ... with images 1.pgm ... 10.pgm; missing: s1/"
        )
    paths, labels, cams = [], [], []
    for person, entry in sorted(folders):
        found = base.list_images(
            os.path.join(root, entry), PATTERN, dataset="ORL faces", example=EXAMPLE
        )
        for path, match in sorted(found, key=lambda f: int(f[1].group(1))):
            index = int(match.group(1))
            if not 1 <= index <= 10:
                raise ValueError(
                    f"ORL faces: {path} has image number {index}; expected 1.pgm ... 10.pgm"
                )
            paths.append(path)
            labels.append(person)
            cams.append(0 if index <= 5 else 1)
    return base.protocol_image_set(
        paths, labels, cams, NAME, camera_rule=True, shots=None, **options
    )
