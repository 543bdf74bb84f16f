// file_io: regular-file checks, bounded reads, atomic writes, output-is-input refusal.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "posenc/io/file_io.hpp"
#include "temp_folder.hpp"

namespace posenc {
namespace {

namespace fs = std::filesystem;

class FileIo : public testing::TempFolderTest {};

TEST_F(FileIo, ReadsARegularFile) {
  Write("a.json", "{\"x\": 1}");
  Result<std::string> r = ReadFileToString(P("a.json"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "{\"x\": 1}");
}

TEST_F(FileIo, DirectoryFifoAndDeviceAreNotRegularFiles) {
  fs::create_directories(P("dir"));
  ASSERT_EQ(::mkfifo(P("fifo").c_str(), 0600), 0);
  fs::create_symlink("/dev/zero", P("config.json"));  // read until memory ran out before
  for (const auto& [path, kind] : {std::pair{P("dir"), "a directory"}, std::pair{P("fifo"), "a FIFO"},
                                   std::pair{P("config.json"), "a character device"}}) {
    Result<std::string> r = ReadFileToString(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(r.status().message().find("not a regular file (" + std::string(kind) + ")"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(path), std::string::npos);
    EXPECT_FALSE(CheckRegularFile(path).ok());
  }
  EXPECT_TRUE(ReadFileToString(P("missing")).status().message().find("No such file") != std::string::npos);
}

TEST_F(FileIo, ReadsAreBounded) {
  Write("big.json", std::string(5000, ' '));
  Result<std::string> r = ReadFileToString(P("big.json"), 4096);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(r.status().message().find("5000 bytes"), std::string::npos) << r.status().message();
}

TEST_F(FileIo, AtomicWriteReplacesAndLeavesNoTemporary) {
  Write("out.bin", "old contents");
  ASSERT_TRUE(WriteFileAtomic(P("out.bin"), std::string_view("new")).ok());
  EXPECT_EQ(*ReadFileToString(P("out.bin")), "new");
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir_)) n += 1 + 0 * e.is_regular_file();
  EXPECT_EQ(n, 1u);
}

TEST_F(FileIo, WriteErrorsCarryErrnoText) {
  const std::string long_name = P(std::string(300, 'n'));
  Status s = WriteFileAtomic(long_name, std::string_view("x"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("File name too long"), std::string::npos) << s.message();
  Status m = WriteFileAtomic(P("no/such/folder/x.npy"), std::string_view("x"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("No such file or directory"), std::string::npos) << m.message();
  // A symlink loop as the output.
  fs::create_symlink(P("loop2"), P("loop1"));
  fs::create_symlink(P("loop1"), P("loop2"));
  Status l = WriteFileAtomic(P("loop1"), std::string_view("x"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.message().find("symbolic links"), std::string::npos) << l.message();
}

TEST_F(FileIo, OutputThatIsAnInputIsRefusedAlsoThroughLinks) {
  Write("model.bin", "weights");
  fs::create_symlink(P("model.bin"), P("sym.bin"));
  fs::create_hard_link(P("model.bin"), P("hard.bin"));
  const std::string inputs[] = {P("config.json"), P("model.bin")};
  for (const std::string& out : {P("model.bin"), P("sym.bin"), P("hard.bin"), P("./model.bin")}) {
    Status s = RefuseOutputIsInput(out, inputs);
    ASSERT_FALSE(s.ok()) << out;
    EXPECT_NE(s.message().find("is the input"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(out), std::string::npos) << s.message();
  }
  EXPECT_TRUE(RefuseOutputIsInput(P("new.bin"), inputs).ok());
  Write("other.bin", "x");
  EXPECT_TRUE(RefuseOutputIsInput(P("other.bin"), inputs).ok());
  EXPECT_EQ(*ReadFileToString(P("model.bin")), "weights");
}

// A folder input (a Hugging Face model folder) covers the files already in it; a new file beside them
// and a file elsewhere are fine.
TEST_F(FileIo, AFileInsideAnInputFolderIsAnInput) {
  fs::create_directories(P("hf"));
  std::ofstream(P("hf/config.json")) << "{}";
  std::ofstream(P("hf/model-00002-of-00002.safetensors")) << "x";
  const std::string inputs[] = {P("hf")};
  for (const char* name : {"hf/config.json", "hf/model-00002-of-00002.safetensors"}) {
    Status s = RefuseOutputIsInput(P(name), inputs);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find("inside the input folder"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(RefuseOutputIsInput(P("hf/new.npy"), inputs).ok());
  std::ofstream(P("elsewhere.npy")) << "x";
  EXPECT_TRUE(RefuseOutputIsInput(P("elsewhere.npy"), inputs).ok());
}

}  // namespace
}  // namespace posenc
