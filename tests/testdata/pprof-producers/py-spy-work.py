# The py-spy target of tests/fixtures/pprof/py-spy-raw.folded: `py-spy record --format raw -r 100 -o OUT -- python3 py-spy-work.py`.
import time
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def parse(n):
    return sum(fib(15) for _ in range(n))
def main():
    end = time.time() + 3
    while time.time() < end:
        parse(20)
        fib(18)
main()
