"""A stand-in for the SDK harness's state API in unit tests: `serve` takes a
streamed group's pages (worker/grouped_values.ValuePages) as
`GroupedValues.with_state_token` registers them, and `read_state` is what
Beam's `StateBackedIterableCoder` calls to read them back."""

from apache_beam.coders.coder_impl import create_InputStream


class ServedPages:
    def __init__(self):
        self.served = {}

    def serve(self, pages):
        token = b"t%d" % len(self.served)
        self.served[token] = pages
        return token

    def read_state(self, token, element_impl):
        pages, out, n, more = self.served[token], [], 0, True
        while more:
            page, more = pages.page(n)
            stream = create_InputStream(page)
            while stream.size():
                out.append(element_impl.decode_from_stream(stream, True))
            n += 1
        return out
