#include "log/summary_writer.h"

#include <stb/stb_image_write.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/shape.h"
#include "log/crc32c.h"
#include "log/tensorboard/event.pb.h"

namespace sg::data {

// Note [TensorBoard event files]
// An event file is a sequence of TFRecords, each holding one serialized Event message:
//   uint64 length | uint32 masked crc32c of the length | data | uint32 masked crc32c of the data
// all little-endian (crc32c.h). The first Event holds the file version "brain.Event:2" and no
// summary; every later one a wall time, a step and a Summary with one value. The messages are
// compiled by protoc from log/tensorboard/event.proto, which has TensorBoard's field numbers.
// File names follow TensorBoard's own writer: events.out.tfevents.<seconds>.<host>.<pid>.<n>,
// with n counting the files this process opened, so two writers started in the same second on
// the same directory get two files (TensorBoard reads both, as one run).

// Note [When events reach the file]
// Records go into a stdio buffer on the caller's thread: a scalar costs a serialization and a
// copy, not a system call. The buffer must then reach the disk while the program is busy
// elsewhere; torch flushes every flush_secs (120) from its writer thread. Flushing on the next
// write once flush_secs have passed would need no thread, but a run has long stretches without
// writes — an evaluation, a collective that hangs, a crash after a quiet epoch — and then the
// last points are exactly the ones a user opens TensorBoard to see. So one background thread
// per writer sleeps on a condition variable and flushes every event file of the writer (the
// add_scalars runs included) every flush_secs; it takes the same mutex as the writing calls, and
// close() wakes it to exit. A write error on that thread is kept and thrown by the next call.

namespace {

namespace proto = sg::tensorboard;

constexpr double kMaxFlushSeconds = 1e9;  // ~31 years; beyond, the deadline overflows the clock

std::atomic<int64_t> event_files_opened{0};

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

template <typename Unsigned>
void store_little_endian(unsigned char* out, Unsigned value) {
  for (size_t i = 0; i < sizeof(Unsigned); ++i) out[i] = static_cast<unsigned char>(value >> (8 * i));
}

// One event file, written as TFRecords (Note [TensorBoard event files]).
class EventFile {
public:
  EventFile(const std::filesystem::path& directory, const std::string& filename_suffix) {
    std::error_code error;
    std::filesystem::create_directories(directory, error);
    SG_CHECK(!error && std::filesystem::is_directory(directory), "SummaryWriter: cannot create the log directory '",
             directory.string(), "': ", error ? error.message() : "a file of that name is in the way");
    const std::string name = "events.out.tfevents." + tensorboard_seconds() + "." + host_name() + "." +
                             std::to_string(::getpid()) + "." + std::to_string(event_files_opened++) + filename_suffix;
    path_ = (directory / name).string();
    file_ = std::fopen(path_.c_str(), "wb");
    SG_CHECK(file_ != nullptr, "SummaryWriter: cannot create the event file '", path_, "': ", std::strerror(errno));
    proto::Event version;
    version.set_wall_time(seconds_since_epoch());
    version.set_file_version("brain.Event:2");
    write(version);
  }
  ~EventFile() {
    if (file_ != nullptr) std::fclose(file_);
  }
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  const std::string& path() const { return path_; }

  void write(const proto::Event& event) {
    const std::string data = event.SerializeAsString();
    unsigned char header[12], footer[4];
    store_little_endian<uint64_t>(header, data.size());
    store_little_endian<uint32_t>(header + 8, masked_crc32c(header, 8));
    store_little_endian<uint32_t>(footer, masked_crc32c(data.data(), data.size()));
    const bool written = std::fwrite(header, 1, sizeof header, file_) == sizeof header &&
                         std::fwrite(data.data(), 1, data.size(), file_) == data.size() &&
                         std::fwrite(footer, 1, sizeof footer, file_) == sizeof footer;
    SG_CHECK(written, "SummaryWriter: cannot write to '", path_, "': ", std::strerror(errno));
  }

  void flush() {
    SG_CHECK(std::fflush(file_) == 0, "SummaryWriter: cannot write to '", path_, "': ", std::strerror(errno));
  }

  void close() {
    std::FILE* file = std::exchange(file_, nullptr);
    SG_CHECK(std::fclose(file) == 0, "SummaryWriter: cannot write to '", path_, "': ", std::strerror(errno));
  }

private:
  static std::string tensorboard_seconds() {  // %010d of the time in whole seconds, as TensorBoard names files
    char text[32];
    std::snprintf(text, sizeof text, "%010lld", static_cast<long long>(seconds_since_epoch()));
    return text;
  }

  std::string path_;
  std::FILE* file_ = nullptr;
};

// Floating-point pixels are scaled by 255 and u8 ones kept; both clipped to [0, 255] and truncated
// toward zero, as torch's `(x * scale).clip(0, 255).astype(np.uint8)`. NaN becomes 0.
unsigned char to_pixel(float value) {
  if (!(value > 0)) return 0;
  return value >= 255 ? 255 : static_cast<unsigned char>(value);
}

// The PNG of a CHW image, and its channel count in the file (grey is stored as RGB, as torch does).
std::pair<std::string, int> encode_png(const std::string& tag, const Tensor& image) {
  const bool shaped = image.dim() == 3 && (image.size(0) == 1 || image.size(0) == 3 || image.size(0) == 4) &&
                      image.size(1) > 0 && image.size(2) > 0 && image.numel() <= INT_MAX / 3;
  SG_CHECK(shaped, "SummaryWriter::add_image('", tag,
           "'): expected a CHW image with 1, 3 or 4 channels (and fewer "
           "than 2^31 / 3 values), got shape ",
           shape_str(image.sizes()));
  SG_CHECK(is_floating(image.dtype()) || image.dtype() == DType::u8, "SummaryWriter::add_image('", tag,
           "'): expected floating-point values in [0, 1] or u8 values in [0, 255], got ", dtype_name(image.dtype()));
  const float scale = image.dtype() == DType::u8 ? 1.0f : 255.0f;
  const Tensor chw = image.to(Device::cpu()).to(DType::f32).contiguous();
  const int64_t C = chw.size(0), H = chw.size(1), W = chw.size(2);
  const int channels = C == 1 ? 3 : static_cast<int>(C);
  const float* source = chw.data_ptr<float>();
  std::vector<unsigned char> hwc(static_cast<size_t>(H * W * channels));
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x)
      for (int c = 0; c < channels; ++c)
        hwc[static_cast<size_t>((y * W + x) * channels + c)] =
            to_pixel(source[((C == 1 ? 0 : c) * H + y) * W + x] * scale);
  std::string png;
  const auto append = [](void* context, void* data, int size) {
    static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
  };
  const int encoded = stbi_write_png_to_func(append, &png, static_cast<int>(W), static_cast<int>(H), channels,
                                             hwc.data(), static_cast<int>(W) * channels);
  SG_CHECK(encoded != 0, "SummaryWriter::add_image('", tag, "'): stb_image_write could not encode the ",
           shape_str(image.sizes()), " image as PNG");
  return {std::move(png), channels};
}

}  // namespace

struct SummaryWriter::State {
  std::string log_dir;
  SummaryWriterOptions options;
  std::mutex mutex;  // guards everything below
  EventFile main_file;
  std::map<std::string, std::unique_ptr<EventFile>> run_files;  // add_scalars' runs, by directory
  bool closed = false;
  std::string deferred_error;  // a flush error on the flushing thread (Note [When events reach the file])
  std::condition_variable wake;
  std::thread flusher;

  State(const std::string& directory, SummaryWriterOptions writer_options)
      : log_dir(directory),
        options(std::move(writer_options)),
        main_file(directory, options.filename_suffix) {}

  // Checks, with the mutex held, that the writer takes events: open, and no error waiting.
  void check_usable(const char* call) {
    SG_CHECK(!closed, "SummaryWriter '", log_dir, "': ", call, " after close()");
    if (!deferred_error.empty()) throw Error(std::exchange(deferred_error, ""));
  }

  void write(EventFile& file, proto::Summary::Value&& value, int64_t step) {
    proto::Event event;
    event.set_wall_time(seconds_since_epoch());
    event.set_step(step);
    *event.mutable_summary()->add_value() = std::move(value);
    file.write(event);
  }

  EventFile& run_file(const std::string& directory) {
    std::unique_ptr<EventFile>& file = run_files[directory];
    if (file == nullptr) file = std::make_unique<EventFile>(directory, options.filename_suffix);
    return *file;
  }

  void flush_all() {
    main_file.flush();
    for (auto& [directory, file] : run_files) file->flush();
  }

  void flush_periodically() {
    std::unique_lock<std::mutex> lock(mutex);
    const std::chrono::duration<double> period(options.flush_secs);
    while (!wake.wait_for(lock, period, [this] { return closed; })) {
      try {
        flush_all();
      } catch (const std::exception& error) {
        if (deferred_error.empty()) deferred_error = error.what();
      }
    }
  }
};

SummaryWriter::SummaryWriter() = default;

SummaryWriter::SummaryWriter(const std::string& log_dir, SummaryWriterOptions options) {
  SG_CHECK(!log_dir.empty(),
           "SummaryWriter: the log directory is empty (use SummaryWriter() for a writer that "
           "writes nothing)");
  SG_CHECK(std::isfinite(options.flush_secs) && options.flush_secs > 0 && options.flush_secs <= kMaxFlushSeconds,
           "SummaryWriter '", log_dir, "': flush_secs must be positive and at most ", kMaxFlushSeconds, ", got ",
           options.flush_secs);
  state_ = std::make_unique<State>(log_dir, std::move(options));
  state_->flusher = std::thread([state = state_.get()] { state->flush_periodically(); });
}

SummaryWriter::~SummaryWriter() {
  try {
    close();
  } catch (const std::exception& error) {  // a destructor must not throw; the message must not be lost
    std::fprintf(stderr, "%s\n", error.what());
  }
}

const std::string& SummaryWriter::log_dir() const {
  static const std::string none;
  return enabled() ? state_->log_dir : none;
}

std::string SummaryWriter::file_path() const { return enabled() ? state_->main_file.path() : ""; }

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  if (!enabled()) return;
  proto::Summary::Value summary;
  summary.set_tag(tag);
  summary.set_simple_value(static_cast<float>(value));
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->check_usable("add_scalar");
  state_->write(state_->main_file, std::move(summary), step);
}

void SummaryWriter::add_scalars(const std::string& main_tag, const std::map<std::string, double>& values,
                                int64_t step) {
  if (!enabled()) return;
  std::string run_prefix = main_tag;
  std::replace(run_prefix.begin(), run_prefix.end(), '/', '_');
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->check_usable("add_scalars");
  for (const auto& [tag, value] : values) {
    proto::Summary::Value summary;
    summary.set_tag(main_tag);
    summary.set_simple_value(static_cast<float>(value));
    state_->write(state_->run_file(state_->log_dir + "/" + run_prefix + "_" + tag), std::move(summary), step);
  }
}

void SummaryWriter::add_image(const std::string& tag, const Tensor& image, int64_t step) {
  if (!enabled()) return;
  auto [png, channels] = encode_png(tag, image);  // outside the lock: the costly part
  proto::Summary::Value summary;
  summary.set_tag(tag);
  proto::Summary::Image* encoded = summary.mutable_image();
  encoded->set_height(static_cast<int32_t>(image.size(1)));
  encoded->set_width(static_cast<int32_t>(image.size(2)));
  encoded->set_colorspace(channels);
  encoded->set_encoded_image_string(std::move(png));
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->check_usable("add_image");
  state_->write(state_->main_file, std::move(summary), step);
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
  if (!enabled()) return;
  // What TensorBoard's text plugin reads: a string tensor of shape [1] marked with the plugin's name.
  proto::Summary::Value summary;
  summary.set_tag(tag + "/text_summary");
  proto::SummaryMetadata::PluginData* plugin = summary.mutable_metadata()->mutable_plugin_data();
  plugin->set_plugin_name("text");
  plugin->set_content(proto::TextPluginData().SerializeAsString());
  proto::TensorProto* tensor = summary.mutable_tensor();
  tensor->set_dtype(proto::DT_STRING);
  tensor->mutable_tensor_shape()->add_dim()->set_size(1);
  tensor->add_string_val(text);
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->check_usable("add_text");
  state_->write(state_->main_file, std::move(summary), step);
}

void SummaryWriter::flush() {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->check_usable("flush");
  state_->flush_all();
}

void SummaryWriter::close() {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->closed) return;
    state_->closed = true;
  }
  state_->wake.notify_all();
  state_->flusher.join();
  // The flushing thread has ended: the files are this thread's alone. Each is closed even when an
  // earlier one failed; the first error is reported.
  std::string first_error = std::exchange(state_->deferred_error, "");
  const auto close_file = [&](EventFile& file) {
    try {
      file.close();
    } catch (const std::exception& error) {
      if (first_error.empty()) first_error = error.what();
    }
  };
  close_file(state_->main_file);
  for (auto& [directory, file] : state_->run_files) close_file(*file);
  if (!first_error.empty()) throw Error(first_error);
}

}  // namespace sg::data
