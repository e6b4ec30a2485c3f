// Local media files: only inside the allowed directory, after resolving links and '..'.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>

#include "gateway/net/local_media.h"
#include "shared/error.h"
#include "tests/test_util.h"

using m3::net::LocalMediaPolicy;

namespace {
m3::ErrorCode CodeOf(const LocalMediaPolicy& policy, const std::string& ref) {
  try {
    policy.ReadFile(ref, 1 << 20);
  } catch (const m3::Error& e) {
    return e.code();
  }
  FAIL("expected an error for " << ref);
  return m3::ErrorCode::kInternal;
}
}  // namespace

TEST_CASE("local files are read only inside the allowed directory") {
  std::string root = m3::test::TempDir();
  std::string allowed = root + "/media";
  std::filesystem::create_directories(allowed + "/sub");
  m3::test::WriteFile(allowed + "/sub/a.png", "inside");
  m3::test::WriteFile(root + "/secret.png", "outside");
  ::symlink((root + "/secret.png").c_str(), (allowed + "/link.png").c_str());
  std::filesystem::create_directories(root + "/media-evil");
  m3::test::WriteFile(root + "/media-evil/x.png", "sibling");

  LocalMediaPolicy policy({allowed});
  CHECK(policy.ReadFile(allowed + "/sub/a.png", 100) == "inside");
  CHECK(policy.ReadFile("file://" + allowed + "/sub/a.png", 100) == "inside");
  CHECK(policy.ReadFile("file://localhost" + allowed + "/sub/a.png", 100) == "inside");
  CHECK(policy.ReadFile(allowed + "/sub/../sub/a.png", 100) == "inside");

  CHECK(CodeOf(policy, root + "/secret.png") == m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, allowed + "/../secret.png") == m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, "file://" + allowed + "/sub/../../secret.png") ==
        m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, allowed + "/link.png") == m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, root + "/media-evil/x.png") == m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, "/etc/passwd") == m3::ErrorCode::kPermissionDenied);
  CHECK(CodeOf(policy, allowed + "/missing.png") == m3::ErrorCode::kNotFound);
  CHECK(CodeOf(policy, allowed + "/sub") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf(policy, "file://otherhost/x.png") == m3::ErrorCode::kInvalidArgument);
  CHECK(CodeOf(policy, "relative/a.png") == m3::ErrorCode::kInvalidArgument);
  try {
    policy.ReadFile(allowed + "/sub/a.png", 3);
    FAIL("expected kTooLarge");
  } catch (const m3::Error& e) {
    CHECK(e.code() == m3::ErrorCode::kTooLarge);
  }
}

TEST_CASE("local files are refused when no directory is allowed") {
  LocalMediaPolicy off({});
  CHECK_FALSE(off.enabled());
  CHECK(CodeOf(off, m3::test::DataPath("m3-tiny/images/img00_53x37.png")) ==
        m3::ErrorCode::kPermissionDenied);
  CHECK_THROWS_AS(LocalMediaPolicy({"/definitely/not/here"}), m3::Error);
}
