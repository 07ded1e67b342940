"""The maths the pages teach, as pure functions: masking, softmax and sampling, positional encodings."""
