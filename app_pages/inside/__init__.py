"""The Inside a block page (page.py: the block walk and the heads view) and its other views: text -> tokens -> ids
(tokenization.py), the residual stream and the logit lens (stream.py), and what they share (common.py)."""
