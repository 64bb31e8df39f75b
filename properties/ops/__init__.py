"""The ops' room (mirrors ``oracle/ops``): one catalogue record per op with its error model in u,
strategies, property bodies and tests."""
