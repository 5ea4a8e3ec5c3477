// Where the ranks of a hung job stand, and which the others wait for (output/dump_standing.h).
#include <catch2/catch.hpp>

#include "output/dump_standing.h"

using namespace gtrace;

namespace {
DumpedThread rank_main(int rank, std::vector<std::string> python, std::string caller) {
    DumpedThread t;
    t.owner = "rank " + std::to_string(rank);
    t.is_rank_main = true;
    t.pid = 1000 + static_cast<uint32_t>(rank);
    t.python = std::move(python);
    t.caller = std::move(caller);
    return t;
}
} // namespace

TEST_CASE("16 ranks: 15 wait in all_reduce, rank 7 is in the DataLoader: rank 7 is the odd one out") {
    std::vector<DumpedThread> threads;
    for (int r = 0; r < 16; ++r) {
        if (r == 7)
            threads.push_back(rank_main(r, {"__next__ (/venv/site-packages/torch/utils/data/dataloader.py:630)", "train (/job/train.py:98)"},
                                        "train (/job/train.py:98)"));
        else
            threads.push_back(rank_main(r, {"all_reduce (/venv/site-packages/torch/distributed/distributed_c10d.py:2050)",
                                            "train (/job/train.py:120)"},
                                        "train (/job/train.py:120)"));
    }
    DumpedThread worker = rank_main(3, {"_worker_loop (x.py:1)"}, "");
    worker.owner = "rank 3 worker", worker.is_rank_main = false; // not a rank's main thread
    threads.push_back(worker);
    auto ranks = rank_standings(threads, "node-a");
    REQUIRE(ranks.size() == 16);
    CHECK(ranks[0].what == "all_reduce");
    CHECK(ranks[0].in_collective);
    CHECK(ranks[7].what == "DataLoader.__next__");
    CHECK(odd_ones_out(ranks) == std::vector<int>{7});
    std::string text = format_standings(ranks);
    CHECK(text.find("ranks 0-6, 8-15 wait in all_reduce at train (/job/train.py:120)") != std::string::npos);
    CHECK(text.find("rank 7 is in DataLoader.__next__ at train (/job/train.py:98) <- the odd one out") != std::string::npos);
    // Through --json and back (gtrace dump --merge), the same standing.
    auto back = standings_from_json({{"ranks", standings_json(ranks)}}, "d.json");
    REQUIRE(back);
    CHECK(format_standings(*back) == text);
    CHECK(back->at(3).node == "node-a");
    CHECK_FALSE(standings_from_json({{"ranks", {{{"what", "x"}}}}}, "d.json"));
    CHECK_FALSE(standings_from_json(nlohmann::json::array(), "d.json"));
}

TEST_CASE("ranks all in one place have no odd one out; ranges are compact") {
    std::vector<DumpedThread> threads;
    for (int r = 0; r < 3; ++r) threads.push_back(rank_main(r, {"barrier (/t/torch/distributed/distributed_c10d.py:1)"}, "w (/j.py:2)"));
    auto ranks = rank_standings(threads, "");
    CHECK(odd_ones_out(ranks).empty());
    CHECK(format_standings(ranks).find("<-") == std::string::npos);
    CHECK(rank_ranges({5, 0, 1, 2, 9, 10}) == "0-2, 5, 9-10");
    CHECK(rank_ranges({}) == "");
}

TEST_CASE("how long the ranks have stood there: asleep seconds per group, through --json and back") {
    std::vector<DumpedThread> threads;
    for (int r = 0; r < 4; ++r) {
        threads.push_back(rank_main(r, {"all_reduce (/t/torch/distributed/distributed_c10d.py:1)"}, "train (/job/train.py:120)"));
        threads.back().asleep_s = 211.6 + r * 0.2;
    }
    threads.push_back(rank_main(4, {"all_reduce (/t/torch/distributed/distributed_c10d.py:1)"}, "train (/job/train.py:120)"));
    threads.back().asleep_s = 198.2; // woke 14 s later than the others
    threads.push_back(rank_main(5, {"forward (/job/model.py:40)"}, "forward (/job/model.py:40)")); // on a CPU: no time
    threads.push_back(rank_main(6, {"step (/job/train.py:99)"}, "step (/job/train.py:99)"));
    threads.back().asleep_s = 0.3; // under a second: not said
    auto ranks = rank_standings(threads, "node-a");
    std::string text = format_standings(ranks);
    INFO(text);
    CHECK(text.find("ranks 0-4 wait in all_reduce at train (/job/train.py:120) (for 198-212 s, asleep)") != std::string::npos);
    CHECK(text.find("rank 5 is in forward (/job/model.py:40) <- the odd one out") != std::string::npos);
    CHECK(text.find("rank 6 is in step (/job/train.py:99) <- the odd one out") != std::string::npos);
    auto back = standings_from_json({{"ranks", standings_json(ranks)}}, "d.json");
    REQUIRE(back);
    CHECK(format_standings(*back) == text);
    CHECK_FALSE(back->at(5).asleep_s);
    // A hostile file: wrong types read as absent, an impossible rank refused, never an exception.
    auto odd = standings_from_json({{"ranks", {{{"rank", 1}, {"pid", "x"}, {"asleep_s", -5}, {"what", 3}}}}}, "d.json");
    REQUIRE(odd);
    CHECK_FALSE(odd->at(0).asleep_s);
    CHECK(odd->at(0).pid == 0);
    CHECK_FALSE(standings_from_json({{"ranks", {{{"rank", -1}}}}}, "d.json"));
}
