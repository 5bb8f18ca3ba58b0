// Being written: see the header beside it.
