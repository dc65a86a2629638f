ExUnit.start(timeout: 300_000)
