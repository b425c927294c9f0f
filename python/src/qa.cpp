// Question answering and its text tools for Python (loom.qa, loom.text), the Batcher (loom.io), the
// batch-axis ops (loom.batch), ParameterAverage (loom.train) and Session (a forward compiled once and
// run on many minibatches): what the QA sample's recipe needs, under the C++ names. Names and conversions only; the
// minibatch of a QA model's inputs is built in C++ (make_qa_minibatch), so a Python training loop spends no time per
// token.
#include <mutex>

#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

/// Indices from Python (a list of ints, an array): a negative one is a UserError naming `what`.
std::vector<std::size_t> indices_of(const py::handle& given, const std::string& what) {
    if (!py::isinstance<py::iterable>(given))
        throw UserError(what + " is a list of indices; got " + std::string(py::str(py::repr(given))).substr(0, 100));
    std::vector<std::size_t> out;
    for (py::handle item : given) {
        const long long i = item.cast<long long>();
        if (i < 0)
            throw UserError(what + ": item " + std::to_string(out.size()) + " is " + std::to_string(i) +
                            "; indices are 0 or more");
        out.push_back(static_cast<std::size_t>(i));
    }
    return out;
}

/// A row-major [tokens, k] vector of numbers as a numpy array of that shape.
py::array_t<float> rows_of(const std::vector<float>& numbers, std::size_t k) {
    py::array_t<float> out({static_cast<py::ssize_t>(numbers.size() / k), static_cast<py::ssize_t>(k)});
    std::copy(numbers.begin(), numbers.end(), out.mutable_data());
    return out;
}

void bind_text(py::module_& m) {
    py::module_ t = m.def_submodule("text", "loom's text/: Vocabulary, IdfTable, stopwords and the stemmer.");
    py::class_<Vocabulary>(t, "Vocabulary",
                           R"doc(Words and their ids: 0 is padding ("<pad>"), 1 the unknown word ("<unk>"),
the rest words by decreasing count (ties in byte order), so the same data gives the same ids.)doc")
        .def(py::init<>(), "Only the two reserved entries.")
        .def_static(
            "build",
            [](const std::vector<std::vector<std::string>>& token_lists, std::size_t min_count, std::size_t max_size) {
                return Vocabulary::build(token_lists, {.min_count = min_count, .max_size = max_size});
            },
            py::arg("token_lists"), py::arg("min_count") = 1, py::arg("max_size") = 0,
            "The words of token_lists (lists of strings), most frequent first; words seen fewer than min_count "
            "times are unknown; max_size (0: no limit) counts the two reserved entries.")
        .def("size", &Vocabulary::size, "The number of ids, the two reserved ones included.")
        .def("__len__", &Vocabulary::size)
        .def("__contains__", &Vocabulary::contains, py::arg("word"))
        .def("id", &Vocabulary::id, py::arg("word"), "The word's id; 1 (unknown) for an unseen word.")
        .def("ids", &Vocabulary::ids, py::arg("tokens"), "The id of each token.")
        .def("word", &Vocabulary::word, py::arg("id"), "The word of an id; an id >= size() is a loom.UserError.")
        .def("to_text", &Vocabulary::to_text, py::arg("destination") = "text",
             "The text save() writes: a header line, then one word per line in id order.")
        .def_static(
            "parse", [](const std::string& text, const std::string& source) { return Vocabulary::parse(text, source); },
            py::arg("text"), py::arg("source") = "text",
            "The vocabulary of to_text's text; malformed text is a loom.DataError naming source:line.")
        .def("save", &Vocabulary::save, py::arg("path"), "Writes to_text() to path (a temporary file renamed).")
        .def_static("load", &Vocabulary::load, py::arg("path"), "Reads a file save() wrote (loom.DataError if not).");
    py::class_<IdfTable>(t, "IdfTable", "Document frequencies of a collection of token lists (each list a document).")
        .def(py::init<>(), "An empty table (no documents).")
        .def_static("fit", &IdfTable::fit, py::arg("documents"),
                    "The table of documents (lists of tokens); a word counts once per document.")
        .def("__call__", &IdfTable::operator(), py::arg("word"), "log(N / df); an unseen word log(N + 1).")
        .def_readonly("documents", &IdfTable::documents, "N, the documents counted.")
        .def_readonly("document_frequency", &IdfTable::document_frequency, "Per word, the documents it occurs in.")
        .def("to_text", &IdfTable::to_text, "The table as text (to keep inside a model file).")
        .def_static("parse", &IdfTable::parse, py::arg("text"), py::arg("source") = "text",
                    "The table of to_text's text; anything else is a loom.DataError naming source and line.");
    t.def("is_stopword", &is_stopword, py::arg("token"),
          "Whether token is an English function word (or holds no letter or digit).");
    t.def("crude_stem", &crude_stem, py::arg("word"),
          "A crude English suffix stripper: 'games' and 'game', 'founded' and 'found' meet.");
}

void bind_qa_data(py::module_& q) {
    py::class_<QaPair>(q, "QaPair",
                       "One line of a QA file: a question, a candidate sentence and whether it answers it.")
        .def_readonly("question", &QaPair::question, "The question's tokens.")
        .def_readonly("answer", &QaPair::answer, "The candidate sentence's tokens.")
        .def_readonly("label", &QaPair::label, "1: the sentence answers the question.")
        .def_readonly("group", &QaPair::group, "The question's group id, 0.. in order of first appearance.")
        .def_readonly("line", &QaPair::line, "The line in the file, from 1.")
        .def("__repr__", [](const QaPair& p) {
            return "<loom.qa.QaPair group " + std::to_string(p.group) + " label " + std::to_string(p.label) + ">";
        });
    py::class_<RankingMetrics>(q, "RankingMetrics", "What ranking_metrics measured over the questions.")
        .def_readonly("map", &RankingMetrics::map, "Mean average precision over the scored questions.")
        .def_readonly("mrr", &RankingMetrics::mrr, "Mean reciprocal rank of each question's first true candidate.")
        .def_readonly("questions", &RankingMetrics::questions, "Questions scored.")
        .def_readonly("skipped_no_positive", &RankingMetrics::skipped_no_positive,
                      "Questions without a true candidate (skipped).")
        .def_readonly("average_precision", &RankingMetrics::average_precision,
                      "Per scored question, in order of first appearance.");
    py::class_<QaData>(q, "QaData", "A file of question/answer pairs, grouped by question.")
        .def(py::init<>(), "No pairs (e.g. no evaluation file).")
        .def_readonly("source", &QaData::source, "The file's name, for messages.")
        .def_property_readonly(
            "pairs", [](const QaData& d) { return d.pairs; }, "The pairs in file order (a list: a copy).")
        .def_readonly("num_groups", &QaData::num_groups, "The number of distinct questions.")
        .def("__len__", [](const QaData& d) { return d.pairs.size(); })
        .def("num_positives", &QaData::num_positives, "The number of pairs labelled 1.")
        .def("groups", &QaData::groups, "Each pair's question group (what ranking_metrics takes).")
        .def("labels", &QaData::labels, "Each pair's label.")
        .def(
            "rank", [](const QaData& d, const std::vector<double>& scores) { return d.rank(scores); },
            py::arg("scores"), "MAP and MRR of scores (one per pair, in order) over the questions: ranking_metrics.")
        .def("token_lists", &QaData::token_lists,
             "Each question once and every answer: the token lists a Vocabulary or an IdfTable is built from.")
        .def("by_question", &QaData::by_question, py::arg("mixed_only") = false,
             "Each question's pairs (indices), questions in order of first appearance; mixed_only: only questions "
             "with both a true and a wrong sentence (what a ranking loss learns from).")
        .def("hold_out", &QaData::hold_out, py::arg("every"), py::arg("held_out_source") = "held-out questions",
             "Moves every k-th question (group % every == every - 1) with its pairs out of this data into the "
             "returned QaData; every < 2 is a loom.UserError.")
        .def("__repr__", [](const QaData& d) {
            return "<loom.qa.QaData " + d.source + ": " + std::to_string(d.pairs.size()) + " pairs, " +
                   std::to_string(d.num_groups) + " questions>";
        });
    q.def(
        "read_qa_tsv",
        [](const std::string& path, bool lowercase) { return read_qa_tsv(path, {.lowercase = lowercase}); },
        py::arg("path"), py::arg("lowercase") = true,
        "A tokenised QA file (SelQA's: question<TAB>sentence<TAB>label, tokens separated by spaces). A missing "
        "file or a malformed row is a loom.DataError naming file:line.");
    q.def("read_qa_text", &read_qa_text, py::arg("path"), py::arg("labels_optional") = false,
          "Raw text (question<TAB>sentence[<TAB>label], tokenised here; an optional header line); what the QA "
          "sample reads. A missing file or a malformed row is a loom.DataError naming file:line.");
    q.def(
        "make_synthetic_qa",
        [](std::size_t questions, std::size_t candidates, std::size_t vocab, std::size_t topics,
           std::size_t topic_words, std::size_t copy, std::size_t distractor_copy, std::uint64_t seed,
           std::uint64_t topic_seed) {
            SyntheticQaOptions o;
            o.questions = questions, o.candidates = candidates, o.vocab = vocab, o.topics = topics;
            o.topic_words = topic_words, o.copy = copy, o.distractor_copy = distractor_copy;
            o.seed = seed, o.topic_seed = topic_seed;
            return make_synthetic_qa(o);
        },
        py::arg("questions") = 400, py::arg("candidates") = 4, py::arg("vocab") = 10000, py::arg("topics") = 20,
        py::arg("topic_words") = 50, py::arg("copy") = 3, py::arg("distractor_copy") = 0, py::arg("seed") = 1,
        py::arg("topic_seed") = 1,
        "Question/answer pairs with a known signal (qa/synthetic_qa.hpp): each question has a hidden topic; its "
        "true answer shares the topic and repeats `copy` of its words, each wrong one comes from another topic "
        "and repeats `distractor_copy`. Tokens are 'w<id>'. Keep topic_seed equal for training and evaluation.");

    py::class_<QaMinibatch>(q, "QaMinibatch", "A QA model's inputs for some pairs, as loom.Values ready to bind.")
        .def_readonly("items", &QaMinibatch::items, "Indices into the data's pairs, in batch order.")
        .def_readonly("questions", &QaMinibatch::questions, "Id sequences, sample shape (1,).")
        .def_readonly("answers", &QaMinibatch::answers, "Id sequences, sample shape (1,).")
        .def_readonly("labels", &QaMinibatch::labels, "A batch [N, 1] of 0 / 1.")
        .def_readonly("question_features", &QaMinibatch::question_features,
                      "With an idf table: each question's match_features against its answer, sequences [T, 6].")
        .def_readonly("answer_features", &QaMinibatch::answer_features,
                      "With an idf table: each answer's match_features against its question.");
    q.def(
        "make_qa_minibatch",
        [](const QaData& data, const Vocabulary& vocab, const py::object& items, const IdfTable* idf) {
            const std::vector<std::size_t> i = indices_of(items, "make_qa_minibatch: items");
            py::gil_scoped_release released;
            return idf ? make_qa_minibatch(data, vocab, i, *idf) : make_qa_minibatch(data, vocab, i);
        },
        py::arg("data"), py::arg("vocabulary"), py::arg("items"), py::arg("idf") = nullptr,
        "The pairs `items` of data as a model's inputs: ids through the vocabulary, labels and, with an idf "
        "table, each side's match_features; built in C++. An empty batch or an index out of range is a "
        "loom.UserError.");
}

void bind_qa_scores(py::module_& q) {
    py::enum_<TieBreak>(q, "TieBreak", "How ranking_metrics orders candidates of equal score.")
        .value("input_order", TieBreak::input_order, "Their order in the data (a stable sort).")
        .value("pessimistic", TieBreak::pessimistic, "Wrong before true: a lower bound.")
        .value("optimistic", TieBreak::optimistic, "True before wrong: an upper bound.");
    q.def("ranking_metrics", &ranking_metrics, py::arg("groups"), py::arg("scores"), py::arg("labels"),
          py::arg("ties") = TieBreak::input_order,
          "MAP and MRR of candidates ranked by decreasing score within each group (groups[i], scores[i], "
          "labels[i] describe candidate i; labels 0 or 1). Groups without a true candidate are skipped and counted.");
    py::class_<PairedInterval>(q, "PairedInterval", "A mean difference and its 95 % interval.")
        .def_readonly("mean", &PairedInterval::mean, "mean(a - b) over the items.")
        .def_readonly("low", &PairedInterval::low, "The interval's lower end.")
        .def_readonly("high", &PairedInterval::high, "The interval's upper end.");
    q.def("paired_bootstrap", &paired_bootstrap, py::arg("a"), py::arg("b"), py::arg("seed") = 1,
          "The 95 % interval of mean(a - b) over items resampled with replacement 2000 times (a, b: one number "
          "per question, paired by position).");
    q.def("significant_weight", &significant_weight, py::arg("groups"), py::arg("labels"), py::arg("a"), py::arg("b"),
          py::arg("candidates"),
          "The weight w among candidates for which a + w * b gains most average precision over a alone, counting "
          "only gains whose paired-bootstrap interval is above zero; 0 when none is.");
    q.def("word_overlap", &word_overlap, py::arg("question"), py::arg("answer"), py::arg("idf") = nullptr,
          "Distinct non-stopwords shared by question and answer (token lists), each counted 1 or its idf.");
    q.def(
        "match_features",
        [](const std::vector<std::string>& tokens, const std::vector<std::string>& other, const IdfTable& idf) {
            return rows_of(match_features(tokens, other, idf), match_feature_count);
        },
        py::arg("tokens"), py::arg("other"), py::arg("idf"),
        "Per token of tokens, 6 numbers (an array [T, 6]): shared with other (a non-stopword), that times its "
        "idf over the largest, a neighbour shared too, its stem shared, that times the idf ratio, holds a digit.");
    q.attr("match_feature_count") = match_feature_count;
}

void bind_batcher(py::module_& m) {
    py::module_ io = m.def_submodule("io", "loom's data/batching.hpp: the Batcher.");
    py::class_<Batcher>(io, "Batcher",
                        R"doc(Serves every epoch's minibatches of item indices: shuffled with the seed and
the epoch's number, sorted by length within windows of sort_window batches (0: not sorted).)doc")
        .def(py::init([](const py::object& items, std::size_t batch_size, std::size_t sort_window, bool shuffle,
                         std::uint64_t seed, bool drop_last) {
                 std::vector<ItemLengths> lengths;
                 if (py::isinstance<py::int_>(items)) {
                     const long long n = items.cast<long long>();
                     if (n < 1) throw UserError("Batcher: items is a count (1 or more); got " + std::to_string(n));
                     lengths.resize(static_cast<std::size_t>(n));
                 } else {
                     for (py::handle pair : items) {
                         const auto qa = pair.cast<std::pair<std::size_t, std::size_t>>();
                         lengths.push_back({qa.first, qa.second});
                     }
                 }
                 return Batcher(std::move(lengths), {.batch_size = batch_size,
                                                     .sort_window = sort_window,
                                                     .shuffle = shuffle,
                                                     .seed = seed,
                                                     .drop_last = drop_last});
             }),
             py::arg("items"), py::arg("batch_size") = 32, py::arg("sort_window") = 20, py::arg("shuffle") = true,
             py::arg("seed") = 1, py::arg("drop_last") = false,
             "items: a count, or each item's (question length, answer length).")
        .def("batches_per_epoch", &Batcher::batches_per_epoch,
             "The batches in an epoch: items / batch_size, rounded up (down with drop_last).")
        .def("epoch_batches", &Batcher::epoch_batches, py::arg("epoch"),
             "All batches of an epoch (lists of item indices), in the order they are served.")
        .def("next", &Batcher::next, "The batch at the position, then advances (to the next epoch at the end).")
        .def(
            "set_position",
            [](Batcher& b, std::size_t epoch, std::size_t batch) {
                b.set_position({epoch, batch});
            },
            py::arg("epoch"), py::arg("batch"), "Where next() serves from.");
}

void bind_batch_ops(py::module_& m) {
    py::module_ b = m.def_submodule("batch", "Ops across a batch's items (graph/ops.hpp's batch::).");
    b.def("reduce_sum", &batch::reduce_sum, py::arg("x"), py::arg("name") = "", "The sum over the items: static.");
    b.def("reduce_mean", &batch::reduce_mean, py::arg("x"), py::arg("name") = "", "The mean over the items: static.");
    b.def("reduce_max", &batch::reduce_max, py::arg("x"), py::arg("name") = "", "The maximum over the items: static.");
    b.def("softmax", &batch::softmax, py::arg("x"), py::arg("name") = "",
          "Softmax across the items, element by element (a listwise loss's): a batch value like x.");
    b.def("broadcast_as", &batch::broadcast_as, py::arg("x"), py::arg("like"), py::arg("name") = "",
          "A static value repeated on every item of like's batch.");
}

void bind_average(py::module_& m) {
    py::class_<ParameterAverage>(
        m, "ParameterAverage",
        "The mean of parameters' values over points of a run: add() at each, assign() at the end.")
        .def(py::init<std::vector<Parameter>>(), py::arg("parameters"), "An average of parameters, nothing added yet.")
        .def("add", &ParameterAverage::add, "Adds the parameters' current values.")
        .def_property_readonly("count", &ParameterAverage::count, "How many times add() was called.")
        .def("assign", &ParameterAverage::assign,
             "Sets every parameter to the mean of the values added; nothing added is a loom.UserError.");
}

/// A Session for Python: its outputs (to check the data against) and one forward at a time.
struct PySession {
    std::vector<Variable> outputs;
    std::unique_ptr<Session> session;
    std::mutex running;
};

void bind_session(py::module_& m) {
    py::class_<PySession>(m, "Session",
                          R"doc(Session(outputs): the graph of outputs (a Variable or a list) compiled once; eval
runs it forward on each minibatch, reusing its plan and buffers. Variable.eval compiles the graph at
every call, which costs more than a small minibatch's forward: score many minibatches with one
Session. It runs in inference mode (dropout is the identity), as eval. loom's; not in CNTK.)doc")
        .def(py::init([](const py::object& outputs) {
                 auto s = std::make_unique<PySession>();
                 if (py::isinstance<Variable>(outputs)) {
                     s->outputs.push_back(outputs.cast<Variable>());
                 } else {
                     for (py::handle item : outputs) {
                         if (!py::isinstance<Variable>(item))
                             throw UserError("Session: outputs is a Variable or a list of Variables; got " +
                                             std::string(py::str(py::repr(item))).substr(0, 100));
                         s->outputs.push_back(item.cast<Variable>());
                     }
                 }
                 if (s->outputs.empty()) throw UserError("Session: no outputs given");
                 s->session = std::make_unique<Session>(s->outputs);
                 return s;
             }),
             py::arg("outputs"))
        .def(
            "eval",
            [](PySession& s, const py::object& arguments) -> py::object {
                const Bindings b = bindings_of(s.outputs, arguments, "Session.eval");
                std::vector<Value> values;
                {
                    py::gil_scoped_release released;
                    std::lock_guard<std::mutex> one_at_a_time(s.running);
                    s.session->forward(b, "Session.eval");
                    for (const Variable& v : s.outputs) values.push_back(s.session->value(v));
                }
                if (s.outputs.size() == 1) return to_numpy(std::move(values[0]));
                py::dict out;
                for (std::size_t i = 0; i < values.size(); ++i)
                    out[wrap(s.outputs[i])] = to_numpy(std::move(values[i]));
                return out;
            },
            py::arg("arguments"),
            "The outputs' values on arguments ({input: data}, as Variable.eval): one array, or a dict by output "
            "when the session has several.")
        .def_property_readonly(
            "outputs",
            [](const PySession& s) {
                py::list out;
                for (const Variable& v : s.outputs) out.append(wrap(v));
                return out;
            },
            "The outputs it computes.");
}

}  // namespace

void bind_qa(py::module_& m) {
    bind_session(m);
    bind_text(m);
    py::module_ q = m.def_submodule("qa", "loom's qa/: QA files, overlap baselines, ranking metrics, synthetic data.");
    bind_qa_data(q);
    bind_qa_scores(q);
    bind_batcher(m);
    bind_batch_ops(m);
    bind_average(m);
}

}  // namespace loom_python
