r"""The paper's protocol over every selected method and dataset, resumable and parallel.

  python -m experiments.protocol --config=configs/protocol.py:synthetic \
      --workdir=/tmp/protocol \
      [--num_workers=2] [--stage=all|cv|runs|report] [--num_shards=N --shard_index=I]

Stages (``all`` runs the three in order):

* ``cv``: for every method of ``cv.methods`` and dataset, every (lambda, eta) of the grid
  on each of the first ``cv.num_splits`` splits: the split's training identities are
  divided again (``cv.val_fraction`` of them held out, queries and gallery drawn from them
  as for a test split), the method is fitted on the rest and its validation rank-1 written
  to ``cv/<dataset>/<method>/split_<c>/lam_<lam>_eta_<eta>/result.json``;
* ``runs``: every (method, dataset, split) fitted on the split's training part and
  evaluated on its queries and gallery, into ``runs/<dataset>/<method>/split_<s>/``
  (``warca_jax.runs.pipeline.run_split``: the results, the model and its training log); the
  cross-validated methods use the grid point with the best mean validation score
  (``cv/<dataset>/<method>/selected.json``);
* ``report``: mean and std over splits into ``table2.md`` / ``table2_{rank1,rank5,auc}.csv``
  (the paper's Table 2: rows datasets, columns methods), ``study.md`` / ``study.csv`` (the
  study's rank-1, rank-10 and mAP per dataset and method), ``results.json``, and one CMC
  plot per dataset with every method, ``cmc_<dataset>.png``.

Every job writes its outcome when it finishes and is skipped when its outcome is there, so
an interrupted protocol started again loses nothing and redoes nothing. Each job's folder
holds the config it ran with; a job whose config has changed since is refused rather than
mixed (use a new workdir). Jobs are independent: ``--num_workers`` runs them in local
processes, and ``--num_shards``/``--shard_index`` give each machine every N-th job of a
stage over a shared workdir (README: "Running the protocol on several machines").

What a resume (and the report) trusts is checked first. A job's outcome file, its
``result.json`` / ``split_<s>.json`` or its ``failed.json``, records the job it belongs to
(``dataset``, ``method`` label, ``split``, and the SHA-256 of the job's config and of the
data, ``config_sha256`` and ``data_sha256``); it is reused only when it parses, names this
job and (a result) holds finite measures in range. Anything else (a file cut short by a
crash, a NaN, a copy of another split's or method's file, a result of another config) is
redone, with a log line naming the file. The stored dataset ``data/<name>.npz`` carries a
fingerprint of its arrays and is rebuilt when it does not read back whole.

Outcomes other than a result, shown in the tables instead of a number:

* not applicable (``n/a``, with the reason as a note): the learner's own check of its
  config against a dataset's training data refuses it (a ``ValueError`` from its
  ``validate``, e.g. LMNN's k = 3 target neighbours on VIPeR's two images per identity).
  Decided before any training, every time the protocol starts; the rest of the grid runs.
* failed (``failed``, with the reason as a note, and in the job's ``failed.json``): the
  job started and training or evaluation failed on the data (it diverged, a matrix was
  singular, a non-finite result). A failed grid point of the cross-validation is never
  selected; a failed run is an error of the protocol once the grid is done (a
  ``RuntimeError`` naming it, after the report is written). A failure is an outcome: a
  restart does not redo it (the same config fails the same way); remove the job's
  ``failed.json`` to run it again.

Any other exception (a bug) stops the protocol at once.

Layout (one concern per module; imports point down this list, never up, so there are
no cycles; the modules below ``runner`` know nothing of the command line):

* ``__main__``  the absl flags and ``main`` (``python -m experiments.protocol``); thin.
* ``runner``    ``run_protocol``: the stages in order, from the plan to the report.
* ``report``    ``collect`` (the runs' verified outcomes, mean and std over splits) and
                ``write_report`` (Table 2 and the study's tables, CMC plots, results.json).
* ``pool``      ``execute``: a stage's pending jobs, here or in spawned worker processes
                (which import ``jobs`` by name); ``shard``: a machine's share of them.
* ``runs``      ``check_applicable`` (which learners refuse which datasets, before any
                training) and ``run_jobs`` (the runs, with the cross-validated selection).
* ``cv``        the cross-validation jobs and ``select`` (the best grid point).
* ``jobs``      one job: the job dict, its outcome files (recorded identity, verified
                reuse), running it (``run_job``), claiming its folder.
* ``datasets``  the stored-dataset cache (``data/<name>.npz`` with its fingerprint) and
                the validation splits drawn inside a split's training part.
* ``plan``      ``Plan`` (the checked config) and the config of one run
                (``method_config``, ``run_method_config``, ``data_config``, ``run_config``).
* ``fields``    the config's list and map fields read as data, with errors naming the
                field, the value given and an example override.

The names below are re-exported for callers and tests (``protocol.run_protocol``).
"""

from warca_jax.protocol.plan import Plan, data_config, method_config, run_method_config
from warca_jax.protocol.runner import run_protocol

__all__ = [
    "Plan",
    "data_config",
    "method_config",
    "run_method_config",
    "run_protocol",
]
