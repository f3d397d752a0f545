// io/atomic_file.h: a file appears complete or not at all; a failure leaves neither a file nor a temporary,
// and an existing file is replaced only by a write that succeeds.
#include "io/atomic_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace msa {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "msa-atomic-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The names in the directory, sorted.
  std::vector<std::string> List() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  static std::string Read(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(file), {});
  }
  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

TEST_F(AtomicFileTest, WritesBytesAndLeavesNoTemporary) {
  ASSERT_TRUE(WriteFileAtomically(Path("a.txt"), "hello").ok());
  EXPECT_EQ(Read(Path("a.txt")), "hello");
  ASSERT_TRUE(WriteFileAtomically(Path("a.txt"), std::string_view()).ok());  // replaced, now empty
  EXPECT_EQ(Read(Path("a.txt")), "");
  EXPECT_EQ(List(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFileTest, FailedWriterLeavesTheOldFileAndNoTemporary) {
  ASSERT_TRUE(WriteFileAtomically(Path("a.txt"), "old").ok());
  const Status status = WriteFileAtomically(Path("a.txt"), [](std::FILE* file) {
    std::fputs("partial", file);
    errno = ENOSPC;
    return false;
  });
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(Path("a.txt") + ": cannot write " + Path("a.txt") + ".tmp."), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find(std::strerror(ENOSPC)), std::string::npos) << status.message();
  EXPECT_EQ(Read(Path("a.txt")), "old");
  EXPECT_EQ(List(), std::vector<std::string>{"a.txt"});
}

TEST_F(AtomicFileTest, MissingDirectoryFailsAndCreatesNothing) {
  const std::string path = Path("no_such_dir/a.txt");
  const Status status = WriteFileAtomically(path, "x");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(path + ": cannot create"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(std::strerror(ENOENT)), std::string::npos) << status.message();
  EXPECT_TRUE(List().empty());
}

TEST_F(AtomicFileTest, RenameOntoADirectoryFailsAndRemovesTheTemporary) {
  fs::create_directory(Path("taken"));
  fs::create_directory(Path("taken/inside"));  // a non-empty directory: rename(2) cannot replace it
  const Status status = WriteFileAtomically(Path("taken"), "x");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_NE(status.message().find(Path("taken") + ": cannot rename"), std::string::npos) << status.message();
  EXPECT_EQ(List(), std::vector<std::string>{"taken"});
  EXPECT_TRUE(fs::is_directory(Path("taken/inside")));
}

TEST_F(AtomicFileTest, PathWriterFailureRemovesWhatItLeft) {
  ASSERT_TRUE(WriteFileAtomically(Path("plot.png"), "old").ok());
  const Status status = WriteFileThroughTemporary(Path("plot.png"), [](const std::string& temporary) {
    std::ofstream(temporary) << "half a figure";
    return IoError("the plotting program failed");
  });
  EXPECT_EQ(status.message(), "the plotting program failed");
  EXPECT_EQ(Read(Path("plot.png")), "old");
  EXPECT_EQ(List(), std::vector<std::string>{"plot.png"});

  ASSERT_TRUE(WriteFileThroughTemporary(Path("plot.png"), [](const std::string& temporary) {
                std::ofstream(temporary) << "new";
                return Status::Ok();
              }).ok());
  EXPECT_EQ(Read(Path("plot.png")), "new");
  EXPECT_EQ(List(), std::vector<std::string>{"plot.png"});
}

TEST_F(AtomicFileTest, AFileSetBecomesVisibleOnlyAtCommit) {
  {
    AtomicFileSet files;
    ASSERT_TRUE(files.Stage(Path("a.csv"), "a").ok());
    ASSERT_TRUE(files.Stage(Path("b.json"), "b").ok());
    EXPECT_EQ(List().size(), 2u);  // the two temporaries
    EXPECT_FALSE(fs::exists(Path("a.csv")));
    EXPECT_FALSE(fs::exists(Path("b.json")));
  }  // never committed: nothing remains
  EXPECT_TRUE(List().empty());

  AtomicFileSet files;
  ASSERT_TRUE(files.Stage(Path("a.csv"), "a").ok());
  EXPECT_EQ(files.Stage(Path("no_such_dir/b.json"), "b").code(), StatusCode::kIoError);
  ASSERT_TRUE(files.Stage(Path("b.json"), "b").ok());
  ASSERT_TRUE(files.Commit().ok());
  EXPECT_EQ(List(), (std::vector<std::string>{"a.csv", "b.json"}));
  EXPECT_EQ(Read(Path("a.csv")), "a");
  EXPECT_EQ(Read(Path("b.json")), "b");
}

}  // namespace
}  // namespace msa
