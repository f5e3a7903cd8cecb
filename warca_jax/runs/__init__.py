"""A run of one learner on every split, as ``python -m experiments.main`` makes it: the
library's defaults that configs start from (``defaults``), the config's checks before any
work (``config_checks``), the checked plan (``run_plan``), fit, save, evaluate and resume
(``pipeline``), and what every entry point shares: flags, one-line errors (``cli``) and
Ctrl-C and SIGTERM (``stops``)."""
