"""Analyses computed on a ForwardTrace: head statistics, the residual stream, logit lens, attribution, ablation."""
