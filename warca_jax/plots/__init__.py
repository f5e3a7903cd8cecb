"""The figures: CMC curves and ranked lists and the helpers every figure shares (``cmc``), a
run's figures (``run_plots``), the studies' plots (``study_plots``); each drawn without
touching matplotlib's global backend."""
