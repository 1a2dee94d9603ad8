"""One evaluated run, without MLflow: the prepared data, the built pipeline, retrieval and
generation scored apart, and the portable results."""
