// The own HTTP/2 client's session (src/h2/session.*) fed a server's bytes:
// three streams open (one uploading), the input given in pieces whose size
// its first byte picks, the owners consuming, and one cancelling as data
// comes. Nothing may crash, leak or grow without bound; every stream ends.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "h2/session.h"

namespace {

struct Owner : abide::h2::StreamEvents {
  abide::h2::Session* session = nullptr;
  std::int32_t id = 0;
  bool cancel_on_data = false;
  std::size_t seen = 0;
  bool ended = false;
  void on_head(int status, std::span<const abide::h2::Field> fields) override {
    seen += static_cast<std::size_t>(status);
    for (const auto& f : fields) seen += f.name.size() + f.value.size();
  }
  void on_data(std::string_view data) override {
    seen += data.size();
    if (cancel_on_data)
      session->cancel(id);
    else
      session->consume(id, data.size());
  }
  void on_end(const abide::h2::StreamEnd&) override {
    if (ended) __builtin_trap();  // the last call comes once
    ended = true;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Owner a, b, c;
  abide::h2::Session s({.stream_window = 1024, .max_head_bytes = 2048, .max_streams = 10});
  const std::string upload(3000, 'u');
  const abide::h2::RequestHead get{"GET", "https", "h", "/", {}};
  const abide::h2::RequestHead post{"POST", "https", "h", "/up", {}};
  for (Owner* o : {&a, &b}) {
    o->session = &s;
    o->id = s.open(get, {}, *o);
  }
  c.session = &s;
  c.cancel_on_data = true;
  c.id = s.open(post, upload, c);
  std::string out;
  (void)s.produce(out, 1 << 20);
  const std::size_t step = size > 0 ? data[0] % 64 + 1 : 1;
  for (std::size_t i = 1; i < size; i += step) {
    const std::size_t n = std::min(step, size - i);
    if (!s.receive(std::span<const char>(reinterpret_cast<const char*>(data + i), n))) break;
    out.clear();
    if (!s.produce(out, 1 << 16)) break;
  }
  s.fail_all("the fuzz input ended");
  if (!a.ended || !b.ended || s.open_streams() != 0) __builtin_trap();
  return 0;
}
