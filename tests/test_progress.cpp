// The progress bar's text and the CSV metrics log.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "helpers.h"
#include "log/metrics_log.h"
#include "log/progress_bar.h"

using namespace sg;

TEST_CASE("durations print as mm:ss or h:mm:ss") {
  CHECK(data::format_duration(0) == "00:00");
  CHECK(data::format_duration(125.4) == "02:05");
  CHECK(data::format_duration(3723) == "1:02:03");
}

TEST_CASE("the progress line shows the bar, the count, the rate unit and the values") {
  std::FILE* sink = std::tmpfile();
  data::ProgressBar bar(10, "epoch 1/4", "img", sink);
  bar.update(5, 320, {{"loss", 0.5}});
  const std::string line = bar.line();
  CHECK(line.find("epoch 1/4 ############.............") == 0);
  CHECK(line.find(" 5/10 [") != std::string::npos);
  CHECK(line.find("img/s]") != std::string::npos);
  CHECK(line.find("loss=0.5") != std::string::npos);
  std::fclose(sink);
}

TEST_CASE("a non-terminal progress bar prints one line per tenth and a final line") {
  std::FILE* sink = std::tmpfile();
  {
    data::ProgressBar bar(20, "eval", "img", sink);
    for (int i = 0; i < 20; ++i) bar.update(1, 1);
    bar.finish();
  }
  std::rewind(sink);
  int lines = 0;
  for (int c; (c = std::fgetc(sink)) != EOF;) lines += c == '\n';
  std::fclose(sink);
  CHECK(lines == 11);  // the first step, then 10%, 20%, ..., 100%; finish adds nothing after 100%
}

TEST_CASE("a progress bar without an output draws nothing but still counts and measures") {
  data::ProgressBar bar(4, "epoch 1/1", "img", nullptr);
  bar.update(2, 128, {{"loss", 1.5}});
  bar.finish();
  CHECK(bar.line().find(" 2/4 [") != std::string::npos);
  CHECK(bar.items_per_second() > 0);
}

TEST_CASE("the metrics log writes a header and rows with empty cells for absent columns") {
  const std::string path = "test_progress_metrics.csv";
  {
    data::MetricsLog log(path, {"step", "epoch", "loss", "accuracy"});
    log.write({{"step", "1"}, {"epoch", "0"}, {"loss", "2.3"}});
    log.write({{"epoch", "0"}, {"accuracy", "0.81"}});
    CHECK_THROWS_WITH_AS(log.write({{"lr", "1"}}), doctest::Contains("unknown column 'lr'"), Error);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "step,epoch,loss,accuracy\n1,0,2.3,\n,0,,0.81\n");
  std::remove(path.c_str());
}

TEST_CASE("the metrics log reports a full disk naming the file instead of losing rows") {
  // /dev/full accepts the open and fails every write with ENOSPC, as a full disk does.
  CHECK_THROWS_WITH_AS(data::MetricsLog("/dev/full", {"step", "loss"}),
                       doctest::Contains("metrics log: cannot write to '/dev/full': No space left on device"), Error);
}
