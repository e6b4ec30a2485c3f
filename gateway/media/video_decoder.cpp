// FFmpeg-backed VideoDecoder; see video_decoder.h.
#include "gateway/media/video_decoder.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/mem.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/media/byte_order.h"
#include "gateway/media/image_header.h"
#include "shared/error.h"

namespace m3::media {
namespace {

std::string AvError(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

struct MemoryInput {
  const uint8_t* data = nullptr;
  int64_t size = 0;
  int64_t pos = 0;
};

int ReadMemory(void* opaque, uint8_t* buf, int n) {
  auto* in = static_cast<MemoryInput*>(opaque);
  const int64_t left = in->size - in->pos;
  if (left <= 0) return AVERROR_EOF;
  const int take = static_cast<int>(std::min<int64_t>(left, n));
  std::memcpy(buf, in->data + in->pos, take);
  in->pos += take;
  return take;
}

int64_t SeekMemory(void* opaque, int64_t offset, int whence) {
  auto* in = static_cast<MemoryInput*>(opaque);
  whence &= ~AVSEEK_FORCE;
  if (whence == AVSEEK_SIZE) return in->size;
  int64_t target = offset;
  if (whence == SEEK_CUR) target = in->pos + offset;
  if (whence == SEEK_END) target = in->size + offset;
  if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) return AVERROR(EINVAL);
  if (target < 0 || target > in->size) return AVERROR(EINVAL);
  in->pos = target;
  return target;
}

// Containers may not make the demuxer open other resources (playlists, references).
int RefuseIoOpen(AVFormatContext*, AVIOContext**, const char*, int, AVDictionary**) {
  return AVERROR(EPERM);
}

int SwsColorspace(AVColorSpace cs) {
  switch (cs) {
    case AVCOL_SPC_BT709:
      return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
      return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
      return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
      return SWS_CS_BT2020;
    default:
      return SWS_CS_ITU601;  // BT.601 (470BG, 170M) and unspecified, as FFmpeg does
  }
}

// yuvj* formats are yuv* in full range; swscale wants the plain format plus the range.
AVPixelFormat PlainFormat(AVPixelFormat f, bool* full_range) {
  switch (f) {
    case AV_PIX_FMT_YUVJ420P:
      *full_range = true;
      return AV_PIX_FMT_YUV420P;
    case AV_PIX_FMT_YUVJ422P:
      *full_range = true;
      return AV_PIX_FMT_YUV422P;
    case AV_PIX_FMT_YUVJ444P:
      *full_range = true;
      return AV_PIX_FMT_YUV444P;
    case AV_PIX_FMT_YUVJ440P:
      *full_range = true;
      return AV_PIX_FMT_YUV440P;
    case AV_PIX_FMT_YUVJ411P:
      *full_range = true;
      return AV_PIX_FMT_YUV411P;
    default:
      return f;
  }
}

void Rotate(const ImageBuffer& in, int degrees, ImageBuffer& out) {
  const int64_t w = in.width, h = in.height;
  if (degrees == 180) {
    out.Allocate(w, h, in.order);
    for (int64_t y = 0; y < h; ++y) {
      const uint8_t* s = in.row(y);
      uint8_t* d = out.row(h - 1 - y);
      for (int64_t x = 0; x < w; ++x) std::memcpy(d + 3 * (w - 1 - x), s + 3 * x, 3);
    }
    return;
  }
  out.Allocate(h, w, in.order);  // 90 or 270: width and height swap
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* s = in.row(y);
    for (int64_t x = 0; x < w; ++x) {
      // Clockwise 90: (x, y) -> (h - 1 - y, x); counter-clockwise: (y, w - 1 - x).
      const int64_t ox = degrees == 90 ? h - 1 - y : y;
      const int64_t oy = degrees == 90 ? x : w - 1 - x;
      std::memcpy(out.row(oy) + 3 * ox, s + 3 * x, 3);
    }
  }
}

// Packets (of every stream) one pass over a file may read: 16 per decodable frame, or 1000 a
// second of the longest video allowed (audio and subtitle tracks add packets to every frame),
// whichever is more. Demuxing from memory costs about a microsecond a packet; the cap only
// stops inputs whose index makes the demuxer hand out packets without end. The frames counted
// are at most 2^26 (a billion packets): an image's first-frame decode lifts the frame limit to
// INT64_MAX, and 16 times that overflowed.
int64_t MaxPackets(const MediaLimits& limits) {
  const double by_time = 1000.0 * std::clamp(limits.max_video_seconds, 1.0, 1e6);
  const int64_t frames =
      std::clamp<int64_t>(limits.max_video_frames_decoded, 1000, int64_t{1} << 26);
  return std::max<int64_t>(16 * frames, static_cast<int64_t>(by_time));
}

std::string TooManyPackets(const MediaLimits& limits) {
  return "video: corrupt container (more than " + std::to_string(MaxPackets(limits)) +
         " packets read)";
}

// AVI header chunks (everything before the 'movi' list: stream headers, extradata, INFO tags)
// are read into memory at their declared size, zero-filled first: a 5 KB file whose INFO list
// declares a 2 GB chunk made FFmpeg allocate and clear 2 GB. Such a chunk cannot be real when it
// runs past the end of the file, so it is refused before FFmpeg sees it. Frame data ('movi')
// and the index ('idx1') are streamed, and a truncated file may still cut them short.
void CheckAviHeaderChunks(std::string_view b, size_t begin, size_t end, int depth) {
  size_t p = begin;
  while (p + 8 <= end) {
    const std::string_view id = b.substr(p, 4);
    const size_t size = LoadLE32(b, p + 4);
    const bool list = id == "LIST" && p + 12 <= end;
    if (list && b.substr(p + 8, 4) == "movi") return;
    if (id == "idx1") return;
    Require(size <= b.size() - (p + 8), ErrorCode::kInvalidArgument,
            "AVI: header chunk of " + std::to_string(size) +
                " bytes runs past the end of the file (corrupt or truncated)");
    if (list && depth < 4) CheckAviHeaderChunks(b, p + 12, p + 8 + size, depth + 1);
    p += 8 + size + (size & 1);
  }
}

// FFmpeg's allocations are capped (av_max_alloc, process-wide) at what the largest frame the
// limits allow can need (8 bytes a pixel: 16-bit RGBA), so no header field of a corrupt file can
// make a demuxer allocate gigabytes. Only ever raised, since decoders with different limits may
// run side by side.
void RaiseFfmpegAllocationCap(const MediaLimits& limits) {
  static std::mutex mu;
  static size_t cap = 0;
  const double want =
      std::max(256.0 * (1 << 20),
               8.0 * static_cast<double>(limits.max_video_pixels_per_frame) + 64.0 * (1 << 20));
  const size_t wanted = want >= static_cast<double>(INT_MAX) ? static_cast<size_t>(INT_MAX)
                                                             : static_cast<size_t>(want);
  std::lock_guard<std::mutex> lock(mu);
  if (wanted > cap) {
    cap = wanted;
    av_max_alloc(cap);
  }
}

}  // namespace

struct VideoDecoder::State {
  MediaLimits limits;
  MemoryInput input;
  AVIOContext* avio = nullptr;
  AVFormatContext* fmt = nullptr;
  AVCodecContext* dec = nullptr;
  SwsContext* sws = nullptr;
  AVPacket* pkt = nullptr;
  AVFrame* frame = nullptr;
  int stream = -1;
  double time_base = 0;
  int64_t start_pts = 0;
  VideoInfo info;
  // Colour settings the swscale context was last configured with.
  int sws_cs = -1, sws_range = -1;

  ~State() {
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&pkt);
    avcodec_free_context(&dec);
    avformat_close_input(&fmt);
    if (avio) av_freep(&avio->buffer);
    avio_context_free(&avio);
  }

  void Convert(const AVFrame* f, ImageBuffer& rgb);
};

void VideoDecoder::State::Convert(const AVFrame* f, ImageBuffer& rgb) {
  bool full_range = f->color_range == AVCOL_RANGE_JPEG;
  const AVPixelFormat src = PlainFormat(static_cast<AVPixelFormat>(f->format), &full_range);
  SwsContext* ctx = sws_getCachedContext(sws, f->width, f->height, src, f->width, f->height,
                                         AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  Require(ctx != nullptr, ErrorCode::kUnsupported,
          std::string("video: cannot convert pixel format ") +
              (av_get_pix_fmt_name(src) ? av_get_pix_fmt_name(src) : "?") + " to RGB");
  const int cs = SwsColorspace(f->colorspace);
  if (ctx != sws || cs != sws_cs || int{full_range} != sws_range) {
    sws = ctx;
    sws_cs = cs;
    sws_range = full_range;
    const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(src);
    if (desc && !(desc->flags & AV_PIX_FMT_FLAG_RGB)) {
      sws_setColorspaceDetails(sws, sws_getCoefficients(cs), full_range,
                               sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
    }
  }
  rgb.Allocate(f->width, f->height, ChannelOrder::kRGB);
  uint8_t* dst[4] = {rgb.pixels.data(), nullptr, nullptr, nullptr};
  int dst_stride[4] = {static_cast<int>(rgb.row_bytes()), 0, 0, 0};
  sws_scale(sws, f->data, f->linesize, 0, f->height, dst, dst_stride);
}

VideoDecoder::VideoDecoder(std::string_view bytes, const MediaLimits& limits)
    : s_(std::make_unique<State>()) {
  Require(!bytes.empty(), ErrorCode::kInvalidArgument, "video is empty (0 bytes)");
  Require(static_cast<int64_t>(bytes.size()) <= limits.max_encoded_bytes, ErrorCode::kTooLarge,
          "video of " + std::to_string(bytes.size()) + " bytes is over the limit");
  // FFmpeg would log every problem of untrusted input to stderr; failures reach the caller
  // as m3::Error instead.
  static std::once_flag quiet;
  std::call_once(quiet, [] { av_log_set_level(AV_LOG_FATAL); });
  // FFmpeg's GIF decoder drops a logical screen it cannot allocate and reports no size at all;
  // the screen is in the first 10 bytes, so an oversized one is named for what it is.
  if (SniffFormat(bytes) == MediaFormat::kGif) {
    const ImageHeader gif = ReadImageHeader(bytes);
    Require(gif.width * gif.height <= limits.max_video_pixels_per_frame, ErrorCode::kTooLarge,
            "GIF logical screen of " + std::to_string(gif.width) + "x" +
                std::to_string(gif.height) + " is over the per-frame pixel limit");
  }
  if (bytes.size() >= 12 && bytes.substr(0, 4) == "RIFF" && bytes.substr(8, 4) == "AVI ") {
    CheckAviHeaderChunks(bytes, 12, bytes.size(), 0);
  }
  RaiseFfmpegAllocationCap(limits);
  State& s = *s_;
  s.limits = limits;
  s.input = {reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int64_t>(bytes.size()), 0};
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<uint8_t*>(av_malloc(kIoBuffer));
  Require(buffer != nullptr, ErrorCode::kResourceExhausted, "video: out of memory");
  s.avio = avio_alloc_context(buffer, kIoBuffer, 0, &s.input, ReadMemory, nullptr, SeekMemory);
  if (!s.avio) {
    av_free(buffer);
    throw Error(ErrorCode::kResourceExhausted, "video: out of memory");
  }
  s.fmt = avformat_alloc_context();
  Require(s.fmt != nullptr, ErrorCode::kResourceExhausted, "video: out of memory");
  s.fmt->pb = s.avio;
  s.fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  s.fmt->io_open = RefuseIoOpen;
  s.fmt->format_whitelist =
      av_strdup("mov,matroska,webm,avi,gif,mpegts,mpeg,flv,ogg,ivf,h264,hevc,mjpeg,nut");
  int err = avformat_open_input(&s.fmt, nullptr, nullptr, nullptr);
  Require(err >= 0, ErrorCode::kInvalidArgument,
          "not a readable video (container not recognised or corrupt): " + AvError(err));
  err = avformat_find_stream_info(s.fmt, nullptr);
  Require(err >= 0, ErrorCode::kInvalidArgument, "video: cannot read stream info: " + AvError(err));
  const AVCodec* codec = nullptr;
  s.stream = av_find_best_stream(s.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  Require(s.stream != AVERROR_STREAM_NOT_FOUND, ErrorCode::kInvalidArgument,
          "the file has no video stream");
  AVStream* st = s.fmt->streams[std::max(s.stream, 0)];
  const char* codec_name = avcodec_get_name(st->codecpar->codec_id);
  Require(s.stream >= 0 && codec != nullptr, ErrorCode::kUnsupported,
          std::string("no decoder for video codec ") + (codec_name ? codec_name : "?"));

  VideoInfo& info = s.info;
  info.codec = codec_name ? codec_name : "";
  const int64_t w = st->codecpar->width, h = st->codecpar->height;
  // FFmpeg zeroes sizes it cannot accept (e.g. a header claiming 100000x100000 for a codec
  // with no size of its own), so this also covers absurd claims.
  Require(w > 0 && h > 0, ErrorCode::kInvalidArgument,
          "video: the stream declares no usable frame size (missing, zero or invalid)");
  Require(w * h <= limits.max_video_pixels_per_frame, ErrorCode::kTooLarge,
          "video frames of " + std::to_string(w) + "x" + std::to_string(h) +
              " are over the pixel limit");
  s.time_base = av_q2d(st->time_base);
  s.start_pts = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
  double duration = -1;
  if (st->duration != AV_NOPTS_VALUE && st->duration > 0) duration = st->duration * s.time_base;
  if (duration <= 0 && s.fmt->duration != AV_NOPTS_VALUE && s.fmt->duration > 0) {
    duration = static_cast<double>(s.fmt->duration) / AV_TIME_BASE;
  }
  AVRational rate = st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0 ? st->avg_frame_rate
                                                                             : st->r_frame_rate;
  info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  if (duration <= 0) {
    // No declared duration: demux (without decoding) to the last packet, then rewind.
    int64_t count = 0, packets = 0;
    double last = 0;
    bool seen_last = false;
    AVPacket* p = av_packet_alloc();
    Require(p != nullptr, ErrorCode::kResourceExhausted, "video: out of memory");
    while (av_read_frame(s.fmt, p) >= 0) {
      if (++packets > MaxPackets(limits)) {
        av_packet_free(&p);
        throw Error(ErrorCode::kInvalidArgument, TooManyPackets(limits));
      }
      if (p->stream_index == s.stream) {
        ++count;
        const int64_t ts = p->pts != AV_NOPTS_VALUE ? p->pts : p->dts;
        if (ts != AV_NOPTS_VALUE) {  // in double: a corrupt file's int64 values may overflow
          const double end =
              static_cast<double>(ts) + static_cast<double>(std::max<int64_t>(p->duration, 0));
          last = seen_last ? std::max(last, end) : end;
          seen_last = true;
        }
      }
      av_packet_unref(p);
      if (count > limits.max_video_frames_decoded) {
        av_packet_free(&p);
        throw Error(ErrorCode::kTooLarge, "video has more frames than the limit of " +
                                              std::to_string(limits.max_video_frames_decoded));
      }
    }
    av_packet_free(&p);
    if (seen_last) duration = (last - static_cast<double>(s.start_pts)) * s.time_base;
    if (duration <= 0 && info.fps > 0) duration = count / info.fps;
    if (info.fps <= 0 && duration > 0) info.fps = count / duration;
    av_seek_frame(s.fmt, s.stream, s.start_pts, AVSEEK_FLAG_BACKWARD);
  }
  Require(duration > 0 && std::isfinite(duration), ErrorCode::kInvalidArgument,
          "video: duration unknown");
  Require(duration <= limits.max_video_seconds, ErrorCode::kTooLarge,
          "video of " + std::to_string(duration) + " s is longer than the limit of " +
              std::to_string(limits.max_video_seconds) + " s");
  // The container's index (MP4 sample tables, Matroska cues) times the frames themselves; a
  // file can declare 2 s while its samples are 2^31 ticks apart. Sampling by the declared
  // duration would then ask for frames that are not there and repeat one instead.
  if (const int entries = avformat_index_get_entries_count(st); entries > 0) {
    const AVIndexEntry* last = avformat_index_get_entry(st, entries - 1);
    if (last != nullptr && last->timestamp != AV_NOPTS_VALUE) {
      const double end =
          (static_cast<double>(last->timestamp) - static_cast<double>(s.start_pts)) * s.time_base;
      Require(end <= limits.max_video_seconds, ErrorCode::kTooLarge,
              "video: its index places frames at " + std::to_string(end) +
                  " s, past the limit of " + std::to_string(limits.max_video_seconds) +
                  " s (the declared duration is " + std::to_string(duration) + " s)");
    }
  }
  info.duration = duration;
  if (info.fps <= 0) info.fps = st->nb_frames > 0 ? st->nb_frames / duration : 25.0;
  info.frame_count =
      st->nb_frames > 0 ? st->nb_frames : std::max<int64_t>(1, std::llround(duration * info.fps));

#if LIBAVFORMAT_VERSION_MAJOR < 61
  size_t matrix_size = 0;
  const uint8_t* matrix = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &matrix_size);
  if (matrix && matrix_size >= 9 * sizeof(int32_t)) {
#else
  const AVPacketSideData* sd = av_packet_side_data_get(
      st->codecpar->coded_side_data, st->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
  const uint8_t* matrix = sd && sd->size >= 9 * sizeof(int32_t) ? sd->data : nullptr;
  if (matrix) {
#endif
    const double angle = av_display_rotation_get(reinterpret_cast<const int32_t*>(matrix));
    if (std::isfinite(angle)) {
      // The matrix angle is counter-clockwise; frames are turned clockwise by its negation.
      int cw = static_cast<int>(std::lround(-angle)) % 360;
      if (cw < 0) cw += 360;
      info.rotation = (cw + 45) / 90 * 90 % 360;
    }
  }
  info.width = info.rotation % 180 ? h : w;
  info.height = info.rotation % 180 ? w : h;

  s.dec = avcodec_alloc_context3(codec);
  Require(s.dec != nullptr, ErrorCode::kResourceExhausted, "video: out of memory");
  err = avcodec_parameters_to_context(s.dec, st->codecpar);
  Require(err >= 0, ErrorCode::kInvalidArgument, "video: bad codec parameters: " + AvError(err));
  s.dec->pkt_timebase = st->time_base;
  s.dec->thread_count = limits.decoder_threads;
  s.dec->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
  // A stream may switch to larger frames mid-way; FFmpeg refuses allocations above this.
  s.dec->max_pixels = limits.max_video_pixels_per_frame;
  err = avcodec_open2(s.dec, codec, nullptr);
  Require(err >= 0, ErrorCode::kUnsupported,
          "cannot open the " + info.codec + " decoder: " + AvError(err));
  s.pkt = av_packet_alloc();
  s.frame = av_frame_alloc();
  Require(s.pkt && s.frame, ErrorCode::kResourceExhausted, "video: out of memory");
}

VideoDecoder::~VideoDecoder() = default;

const VideoInfo& VideoDecoder::info() const {
  return s_->info;
}

int64_t VideoDecoder::Decode(std::span<const double> times, const FrameSink& sink) {
  State& s = *s_;
  AVStream* st = s.fmt->streams[s.stream];
  const bool all = times.empty();
  const size_t n = times.size();
  const double frame_period = 1.0 / s.info.fps;
  constexpr double kEps = 1e-6;
  size_t next = 0;  // first requested time not served yet
  int64_t calls = 0, decoded = 0, max_read_pts = INT64_MIN, synthetic_pts = 0, packets = 0;
  // Keyframe of the last seek: seeks only ever go to later keyframes, so a corrupt index that
  // sends the demuxer back to the start cannot make decoding loop forever.
  int64_t last_seek_keyframe = INT64_MIN;
  bool stop = false;
  int decode_errors = 0;
  ImageBuffer rgb, rotated;
  // Each delivered frame is converted, rotated and resampled at full size, however little data
  // it took to encode: a 20 KB GIF of 1x1 frames on an 8000x8000 screen asked for minutes of
  // work. Delivered pixels are capped at 128 frames of the largest size the limits allow (8.6 G
  // pixels by default: 768 sampled 4K frames fit), checked up front and as frames come.
  const double budget = 128.0 * static_cast<double>(s.limits.max_video_pixels_per_frame);
  const double planned = static_cast<double>(all ? s.info.frame_count : static_cast<int64_t>(n)) *
                         static_cast<double>(s.info.width) * static_cast<double>(s.info.height);
  Require(planned <= budget, ErrorCode::kTooLarge,
          "video: " + std::to_string(all ? s.info.frame_count : static_cast<int64_t>(n)) +
              " frames of " + std::to_string(s.info.width) + "x" + std::to_string(s.info.height) +
              " are over the decoding budget of " + std::to_string(static_cast<int64_t>(budget)) +
              " pixels (fewer frames, or a smaller video)");
  double delivered_pixels = 0;

  // Timestamps of a corrupt file can be anywhere in int64: arithmetic on them goes through
  // double, and back to int64 only clamped.
  auto to_seconds = [&](int64_t pts) {
    return (static_cast<double>(pts) - static_cast<double>(s.start_pts)) * s.time_base;
  };
  auto to_ticks = [](double v) -> int64_t {
    if (!(v > -9.0e18)) return INT64_MIN / 2;
    if (!(v < 9.0e18)) return INT64_MAX / 2;
    return static_cast<int64_t>(v);
  };

  auto handle_frame = [&](AVFrame* f) {
    ++decoded;
    Require(int64_t{f->width} * f->height <= s.limits.max_video_pixels_per_frame,
            ErrorCode::kTooLarge,
            "video frame of " + std::to_string(f->width) + "x" + std::to_string(f->height) +
                " is over the pixel limit");
    Require(decoded <= s.limits.max_video_frames_decoded, ErrorCode::kTooLarge,
            "video has more frames than the limit of " +
                std::to_string(s.limits.max_video_frames_decoded));
    int64_t pts = f->best_effort_timestamp;
    double t = pts != AV_NOPTS_VALUE ? to_seconds(pts) : synthetic_pts * frame_period;
    ++synthetic_pts;
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(57, 30, 100)
    const int64_t dur = f->duration;
#else
    const int64_t dur = f->pkt_duration;
#endif
    const double d = dur > 0 ? dur * s.time_base : frame_period;
    // The declared duration can be small while the frames' own timing says otherwise (an MP4
    // whose sample durations claim 2^32 s in all): sampling by those times would repeat one
    // frame for the whole request. The length bound applies to the timing actually used.
    Require(t + d <= s.limits.max_video_seconds, ErrorCode::kTooLarge,
            "video: a frame's timing reaches " + std::to_string(t + d) + " s, past the limit of " +
                std::to_string(s.limits.max_video_seconds) +
                " s (the container's timestamps claim a longer video than its duration)");
    bool converted = false;
    auto deliver = [&](int64_t target) {
      if (!converted) {
        delivered_pixels += static_cast<double>(f->width) * static_cast<double>(f->height);
        Require(delivered_pixels <= budget, ErrorCode::kTooLarge,
                "video: the decoded frames are over the decoding budget of " +
                    std::to_string(static_cast<int64_t>(budget)) + " pixels");
        s.Convert(f, rgb);
        if (s.info.rotation != 0) {
          Rotate(rgb, s.info.rotation, rotated);
          std::swap(rgb, rotated);
        }
        converted = true;
      }
      ++calls;
      if (!sink(rgb, target, std::max(t, 0.0))) stop = true;
    };
    if (all) {
      deliver(calls);
      return;
    }
    while (next < n && times[next] < t + d - kEps && !stop) deliver(static_cast<int64_t>(next++));
    if (next == n) stop = true;
  };

  auto receive_all = [&]() {
    while (!stop) {
      const int r = avcodec_receive_frame(s.dec, s.frame);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) {
        ++decode_errors;
        return;
      }
      handle_frame(s.frame);
      av_frame_unref(s.frame);
    }
  };

  // Whether some requested time falls in [t - one frame, t + d): frames covering no request
  // may be skipped when nothing else references them.
  auto packet_needed = [&](double t, double d) {
    auto it = std::lower_bound(times.begin() + next, times.end(), t - frame_period - kEps);
    return it != times.end() && *it < t + d + kEps;
  };

  // Jumps to the keyframe before the next requested time when that keyframe lies beyond
  // everything read so far (needs a seek index, as MP4 and Matroska have).
  auto maybe_seek = [&]() {
    if (all || next >= n || max_read_pts == INT64_MIN) return;
    const int64_t target = to_ticks(static_cast<double>(s.start_pts) + times[next] / s.time_base);
    const AVIndexEntry* e =
        avformat_index_get_entry_from_timestamp(st, target, AVSEEK_FLAG_BACKWARD);
    if (!e || e->timestamp <= last_seek_keyframe ||
        static_cast<double>(e->timestamp) <=
            static_cast<double>(max_read_pts) + frame_period / s.time_base) {
      return;
    }
    last_seek_keyframe = e->timestamp;
    if (av_seek_frame(s.fmt, s.stream, target, AVSEEK_FLAG_BACKWARD) >= 0) {
      avcodec_flush_buffers(s.dec);
      max_read_pts = INT64_MIN;
    }
  };

  while (!stop) {
    const int r = av_read_frame(s.fmt, s.pkt);
    if (r < 0) break;  // end of file, or a truncated file: decode what was read
    if (++packets > MaxPackets(s.limits)) {
      av_packet_unref(s.pkt);
      throw Error(ErrorCode::kInvalidArgument, TooManyPackets(s.limits));
    }
    if (s.pkt->stream_index != s.stream) {
      av_packet_unref(s.pkt);
      continue;
    }
    const int64_t ts = s.pkt->pts != AV_NOPTS_VALUE ? s.pkt->pts : s.pkt->dts;
    if (!all) {
      bool needed = true;
      if (ts != AV_NOPTS_VALUE) {
        const double d = s.pkt->duration > 0 ? s.pkt->duration * s.time_base : frame_period;
        needed = packet_needed(to_seconds(ts), d);
        max_read_pts = std::max(max_read_pts, ts);
      }
      s.dec->skip_frame = needed ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
    }
    int sent = avcodec_send_packet(s.dec, s.pkt);
    while (sent == AVERROR(EAGAIN)) {
      receive_all();
      if (stop) break;
      sent = avcodec_send_packet(s.dec, s.pkt);
    }
    av_packet_unref(s.pkt);
    if (sent < 0 && sent != AVERROR(EAGAIN)) ++decode_errors;
    receive_all();
    maybe_seek();
  }
  if (!stop) {
    s.dec->skip_frame = AVDISCARD_DEFAULT;
    avcodec_send_packet(s.dec, nullptr);
    receive_all();
  }
  Require(calls > 0, ErrorCode::kInvalidArgument,
          "video: no frame could be decoded (corrupt or truncated file; " +
              std::to_string(decode_errors) + " decoder errors)");
  return calls;
}

}  // namespace m3::media
