#!/bin/bash
# Reward 1 when /app/hello.txt holds exactly "Hello, Harbor!\n", else 0.
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null; echo x)" = "$(printf 'Hello, Harbor!\nx')" ]; then
    echo "hello.txt is correct"
    echo 1 > /logs/verifier/reward.txt
else
    echo "hello.txt is missing or wrong"
    echo 0 > /logs/verifier/reward.txt
fi
