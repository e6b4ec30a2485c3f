// libjpeg-turbo decoding (jpeglib API); see jpeg_decoder.h. libjpeg reports fatal errors
// through error_exit, which must not return: it longjmps back to the setjmp in the small C-style
// functions below, which hold nothing with a destructor.
#include "gateway/media/jpeg_decoder.h"

#include <csetjmp>
#include <cstdio>
// After <cstdio>: jpeglib.h needs FILE.
#include <jerror.h>
#include <jpeglib.h>
#include <string>

#include "gateway/media/bicubic_resampler.h"
#include "gateway/media/exif_orientation.h"
#include "shared/error.h"

namespace m3::media {
namespace {

// Rows per strip of the streaming decode: one iMCU row of 4:2:0 data; the strip (about 90 KB
// for 1920 columns) stays in cache between the decoder writing it and the resampler reading it.
constexpr JDIMENSION kStripRows = 16;

struct ErrorState {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnError(j_common_ptr cinfo) {
  auto* state = reinterpret_cast<ErrorState*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

// Warnings (e.g. "Corrupt JPEG data: extraneous bytes") do not stop decoding, as in PIL, with
// one exception: the entropy-coded data ending (at a marker or at the end of the file) before
// the picture's first pass is complete. libjpeg would fill the rest with gray, so a forged
// header (9000x9000 over the data of a 64x64 picture) would decode to a large blank image and
// cost the full decode. A progressive picture whose later refinement scans are cut is fine
// (its first scan covers every pixel; PIL decodes it the same way).
void OnMessage(j_common_ptr cinfo, int level) {
  if (level >= 0 || cinfo->is_decompressor == 0) return;
  const int code = cinfo->err->msg_code;
  if (code != JWRN_HIT_MARKER && code != JWRN_JPEG_EOF) return;
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->progressive_mode && d->input_scan_number > 1) return;
  auto* state = reinterpret_cast<ErrorState*>(cinfo->err);
  std::snprintf(state->message, sizeof(state->message),
                "the image data ends before the declared %ux%u picture is complete (truncated "
                "data or a header that claims more than the file holds)",
                d->image_width, d->image_height);
  std::longjmp(state->jump, 1);
}

// The decompressor with our error handler, reading `bytes`; jpeg_read_header done.
// Returns false (message in state) on a libjpeg error.
bool Open(jpeg_decompress_struct& cinfo, ErrorState& state, std::string_view bytes) {
  cinfo.err = jpeg_std_error(&state.mgr);
  state.mgr.error_exit = OnError;
  state.mgr.emit_message = OnMessage;
  state.message[0] = '\0';
  if (setjmp(state.jump)) return false;
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  return true;
}

// Sets the output parameters and computes the output size. False on a libjpeg error.
bool Start(jpeg_decompress_struct& cinfo, ErrorState& state, int scale_denom) {
  if (setjmp(state.jump)) return false;
  cinfo.out_color_space = JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned int>(scale_denom);
  jpeg_start_decompress(&cinfo);
  return true;
}

// Reads every scanline into `out` (already sized to the output). False on a libjpeg error.
bool ReadRows(jpeg_decompress_struct& cinfo, ErrorState& state, ImageBuffer& out) {
  if (setjmp(state.jump)) return false;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW rows[8];
    const JDIMENSION first = cinfo.output_scanline;
    const JDIMENSION n = std::min<JDIMENSION>(8, cinfo.output_height - first);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = out.row(first + i);
    jpeg_read_scanlines(&cinfo, rows, n);
  }
  jpeg_finish_decompress(&cinfo);
  return true;
}

// Reads the next strip of scanlines into `strip` rows 0..; *rows gets how many. False on a
// libjpeg error.
bool ReadStrip(jpeg_decompress_struct& cinfo, ErrorState& state, ImageBuffer& strip,
               JDIMENSION* rows) {
  if (setjmp(state.jump)) return false;
  JSAMPROW pointers[kStripRows];
  const JDIMENSION n =
      std::min<JDIMENSION>(kStripRows, cinfo.output_height - cinfo.output_scanline);
  for (JDIMENSION i = 0; i < n; ++i) pointers[i] = strip.row(i);
  *rows = 0;
  // libjpeg hands out at most one iMCU row's worth per call (none only if the source stalls,
  // which a memory source never does: then the caller fails).
  while (*rows < n) {
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, pointers + *rows, n - *rows);
    if (got == 0) break;
    *rows += got;
  }
  return true;
}

bool Finish(jpeg_decompress_struct& cinfo, ErrorState& state) {
  if (setjmp(state.jump)) return false;
  jpeg_finish_decompress(&cinfo);
  return true;
}

// Owns the decompressor so it is destroyed on every path, exceptions included.
struct Decompressor {
  jpeg_decompress_struct cinfo{};
  ErrorState state{};
  bool created = false;
  ~Decompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  [[noreturn]] void Fail() const {
    throw Error(
        ErrorCode::kInvalidArgument,
        std::string("JPEG: cannot decode: ") + (state.message[0] ? state.message : "corrupt data"));
  }
  void OpenOrThrow(std::string_view bytes) {
    created = true;  // jpeg_create_decompress runs first; destroying a partial one is safe
    if (!Open(cinfo, state, bytes)) Fail();
  }
  bool cmyk() const {
    return cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  }
  // Opens `bytes` and starts decompression to RGB at 1/scale_denom. False for CMYK/YCCK
  // JPEGs, which this decoder leaves to the caller's other one.
  bool StartRgbOrThrow(std::string_view bytes, int scale_denom) {
    Require(scale_denom == 1 || scale_denom == 2 || scale_denom == 4 || scale_denom == 8,
            ErrorCode::kInternal, "JPEG: scale must be 1/1, 1/2, 1/4 or 1/8");
    OpenOrThrow(bytes);
    if (cmyk()) return false;
    if (!Start(cinfo, state, scale_denom)) Fail();
    Require(cinfo.output_components == 3, ErrorCode::kInvalidArgument,
            "JPEG: unexpected component count after RGB conversion");
    return true;
  }
};

}  // namespace

JpegInfo ReadJpegInfo(std::string_view bytes) {
  Decompressor d;
  d.OpenOrThrow(bytes);
  JpegInfo info;
  info.width = d.cinfo.image_width;
  info.height = d.cinfo.image_height;
  info.cmyk = d.cmyk();
  info.orientation = ReadJpegExifOrientation(bytes);
  return info;
}

int JpegDraftDenominator(int64_t width, int64_t height, int64_t min_width, int64_t min_height) {
  for (int d : {8, 4, 2}) {
    // libjpeg rounds scaled sizes up.
    if ((width + d - 1) / d >= min_width && (height + d - 1) / d >= min_height) return d;
  }
  return 1;
}

std::optional<ImageBuffer> DecodeJpeg(std::string_view bytes, int scale_denom) {
  Decompressor d;
  if (!d.StartRgbOrThrow(bytes, scale_denom)) return std::nullopt;
  ImageBuffer out;
  out.Allocate(d.cinfo.output_width, d.cinfo.output_height, ChannelOrder::kRGB);
  if (!ReadRows(d.cinfo, d.state, out)) d.Fail();
  return ApplyExifOrientation(std::move(out), ReadJpegExifOrientation(bytes));
}

std::optional<ImageBuffer> DecodeJpegResized(std::string_view bytes, int64_t out_width,
                                             int64_t out_height, int scale_denom) {
  if (ReadJpegExifOrientation(bytes) != 1) {
    std::optional<ImageBuffer> upright = DecodeJpeg(bytes, scale_denom);
    if (!upright) return std::nullopt;
    ImageBuffer out;
    BicubicResampler(upright->width, upright->height, out_width, out_height).Resize(*upright, out);
    return out;
  }
  Decompressor d;
  if (!d.StartRgbOrThrow(bytes, scale_denom)) return std::nullopt;
  const BicubicResampler resampler(d.cinfo.output_width, d.cinfo.output_height, out_width,
                                   out_height);
  ImageBuffer out, strip;
  strip.Allocate(d.cinfo.output_width, kStripRows, ChannelOrder::kRGB);
  BicubicResampler::Stream stream(resampler, ChannelOrder::kRGB, out);
  while (d.cinfo.output_scanline < d.cinfo.output_height) {
    JDIMENSION rows = 0;
    if (!ReadStrip(d.cinfo, d.state, strip, &rows)) d.Fail();
    Require(rows > 0, ErrorCode::kInvalidArgument, "JPEG: cannot decode: the decoder stalled");
    stream.Push(strip, rows);
  }
  if (!Finish(d.cinfo, d.state)) d.Fail();
  Require(stream.done(), ErrorCode::kInternal, "JPEG: the resampler did not get every row");
  return out;
}

}  // namespace m3::media
