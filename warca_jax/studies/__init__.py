"""The studies beyond the protocol's tables: AON against Frobenius (``aon``, its report in
``aon_report``), training time (``training_time``), the CUHK03 study's figures
(``figures``, their ranked lists in ``ranking``), and what they share (``shared``)."""
