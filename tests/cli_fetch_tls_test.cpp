// abide fetch over TLS: -k/--insecure and --http1.1/--http2 against a real
// TLS server on 127.0.0.1.
