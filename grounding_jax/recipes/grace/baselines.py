"""GRACE's baseline prompts, verbatim from the authors' code (arXiv:2601.04525 §4.2, App. B.2).

GRACE evaluates prompted baselines with their own templates plus a 3-shot demonstration (two answerable
examples, one answered "I don't know."), or, for the ARENA baseline, ARENA's prompt with an abstention
instruction added. The message lists are copied exactly; the last user turn holds `{question}` and
`{ref}`, filled by recipe.py (`base.fill`) like the authors' `str.replace`.
"""

# The system turn shared by both 3-shot demonstrations.
FEW_SHOT_SYSTEM = (
    '**Instructions:**\n'
    "You are a helpful assistant. Your task is to answer the user's question based strictly "
    'and solely on the provided context.\n'
    '\n'
    'Please follow these rules carefully:\n'
    '1.  Your answer must be directly supported by the information within the "Context" section.\n'
    '2.  Do not use any external knowledge, personal opinions, or information not found in '
    'the text.\n'
    '3.  If the context does not contain enough information to answer the question, you must '
    'state: "Based on the provided context, I cannot answer this question."\n'
    '4.  Keep your answer concise and to the point.')

# few_shots_hotpot
# The last user turn of both 3-shot demonstrations: the question and passages being asked about.
QUERY_TURN = {"role": "user", "content": (
    '**Question:**\n'
    '{question}\n'
    '\n'
    '**Context:**\n'
    '{ref}\n')}

GRACE_FEW_SHOT_HOTPOTQA = (
    {"role": "system", "content": FEW_SHOT_SYSTEM},
    {"role": "user", "content": (
        '**Question:**\n'
        'Upper Denton is situated on the line of the Roman road that ran through the valleys '
        'of which two rivers?\n'
        '\n'
        '**Context:**\n'
        'Stanegate\n'
        'The Stanegate, or "stone road" (Old Norse), was an important Roman road built in what '
        'is now northern England. It linked two forts that guarded important river crossings; '
        'Corstopitum (Corbridge) in the east, situated on Dere Street, and Luguvalium (Carlisle) '
        'in the west. The Stanegate ran through the natural gap formed by the valleys of the '
        'Tyne and Irthing.\n'
        '\n'
        'Upper Denton\n'
        'Upper Denton is a small village and civil parish in the north of Cumbria, England about '
        '1 km north of the A69 road linking Haltwhistle and Brampton. The population of the civil '
        'parish when taken at the Census 2011 was less than 100. Details are included in the '
        'parish of Nether Denton. The village is situated on the line of the Roman Stanegate '
        'which ran from Corbridge (Coria) to Carlisle (Luguvalium).\n')},
    {"role": "assistant", "content": (
        'Tyne and Irthing')},
    {"role": "user", "content": (
        '**Question:**\n'
        'In what year was the Enblish artist who released her second studio album Fall to Grace '
        'in 2012, born?\n'
        '\n'
        '**Context:**\n'
        'Fall to Grace\n'
        'Fall to Grace is the second studio album by English recording artist Paloma Faith. It '
        'was released by RCA Records on 28 May 2012.\n'
        '\n'
        'Paloma Faith\n'
        'Paloma Faith (born Paloma Faith Blomfield; 21 July 1981) is an English singer, songwriter '
        'and actress, known for her retro and eccentric style. Faith is the only British female '
        'artist other than Adele to have three platinum albums.\n')},
    {"role": "assistant", "content": (
        '21 July 1981')},
    {"role": "user", "content": (
        '**Question:**\n'
        'How many Tony Awards was the musical comedy on which Jonathan Tunick started working '
        'with Stephen Sondheim, nominated for ?\n'
        '\n'
        '**Context:**\n'
        'Stephen Flaherty\n'
        'Stephen Flaherty (born September 18, 1960) is an American composer of musical theatre. '
        'He works most often in collaboration with the lyricist/bookwriter Lynn Ahrens. They '
        'are best known for writing the Broadway musicals "Once on This Island", which was nominated '
        'for eight Tony Awards, "Seussical", which was nominated for the Grammy Award, and "Ragtime", '
        'which was nominated for twelve Tony Awards and won Best Original Score.\n'
        '\n'
        'Pamela Myers\n'
        'Pamela Myers (b. July 15, 1947 in Hamilton, Ohio) is an American actress who made her '
        'Broadway debut as Marta in Stephen Sondheim\'s musical "Company". For this role, in which '
        'she introduced the number, "Another Hundred People," she was nominated at the 1971 Tony '
        'awards for Best Performance by a Featured Actress in a Musical.\n')},
    {"role": "assistant", "content": (
        "I don't know.")},
    QUERY_TURN,
)

# few_shots_qasper
GRACE_FEW_SHOT_QASPER = (
    {"role": "system", "content": FEW_SHOT_SYSTEM},
    {"role": "user", "content": (
        '**Question:**\n'
        'Do they report results only on English data?\n'
        '\n'
        '**Context:**\n'
        'We henceforth refer to a tweet affirming climate change as a “positive" sample (labeled '
        'as 1 in the data), and a tweet denying climate change as a “negative" sample (labeled '
        'as -1 in the data). All data were downloaded from Twitter in two separate batches using '
        'the “twint" scraping tool BIBREF5 to sample historical tweets for several different '
        'search terms; queries always included either “climate change" or “global warming", and '
        'further included disaster-specific search terms (e.g., “bomb cyclone," “blizzard," “snowstorm," '
        'etc.). We refer to the first data batch as “influential" tweets, and the second data '
        'batch as “event-related" tweets.\n')},
    {"role": "assistant", "content": (
        'Yes.')},
    {"role": "user", "content": (
        '**Question:**\n'
        'What are the baseline benchmarks?\n'
        '\n'
        '**Context:**\n'
        'We used the fine-tuning procedure outlined in the original work to adapt the pre-trained '
        'uncased BERT$_\\textrm {{\\scriptsize LARGE}}$ to a multi-class passage classification '
        'task. This technique achieved the best result among our benchmarks, with an average '
        'micro-F1 score of 60.4%.\n'
        '\n'
        '2.One challenge with RNN-based solutions for text classification is finding the best '
        'way to combine word-level representations into higher-level representations.\n'
        '\n'
        '3.Benchmarks ::: ELMo embedding and Bi-directional RNN (ELMo + BiRNN)\n'
        '\n'
        '4.Note that we have omitted the orthogonal regularizer term, since this dataset is relatively '
        'small compared to the traditional datasets used for training such a model. We did not '
        'observe any significant performance gain while using the regularizer term in our experiments.\n'
        '\n'
        '5.Combination of TF-IDF and NRC Emotion lexicons (TF-NRC + SVM)\n'
        '\n'
        '6.For this benchmark, we considered a Hierarchical RNN, following BIBREF16. We used '
        'two BiLSTMs BIBREF17 with 256 units each to model sentences and documents. The tokens '
        'of a sentence were processed independently of other sentence tokens. For each direction '
        'in the token-level BiLSTM, the last outputs were concatenated and fed into the sentence-level '
        'BiLSTM as inputs.\n'
        '\n'
        '7.Classification with Depeche++ Emotion lexicons BIBREF12 + Linear SVM (Depeche + SVM)\n'
        '\n'
        '8.We also used simple classification models with learned embeddings. We trained a Doc2Vec '
        'model BIBREF15 using the dataset and used the embedding document vectors as features '
        'for a linear SVM classifier.\n'
        '\n'
        '9.We computed bag-of-words-based benchmarks using the following methods:\n'
        '\n'
        '10.The benchmark used a layered Bi-directional RNN (60 units) with GRU cells and a dense '
        'layer. Both self-attention layers were 60 units in size and cross-entropy was used as '
        'the cost function.\n'
        '\n'
        '11.Benchmarks ::: Hierarchical RNN\n'
        '\n'
        '12.Benchmarks ::: Bi-directional RNN and Self-Attention (BiRNN + Self-Attention)\n'
        '\n'
        '13.The outputs of the BiLSTM were connected to 2 dense layers with 256 ReLU units and '
        'a Softmax layer. We initialized tokens with publicly available embeddings trained with '
        'GloVe BIBREF18. Sentence boundaries were provided by SpaCy. Dropout was applied to the '
        'dense hidden layers during training.\n'
        '\n'
        '14.We used the pre-trained ELMo model (v2) available on Tensorhub for this benchmark. '
        'We fed the word embeddings of ELMo as input into a one layer Bi-directional RNN (16 '
        'units) with GRU cells (with dropout) and a dense layer. Cross-entropy was used as the '
        'cost function.\n'
        '\n'
        '15.Benchmarks ::: Fine-tuned BERT\n'
        '\n'
        '16.Classification with NRC Emotion lexicons BIBREF13, BIBREF14 + Linear SVM (NRC + SVM)\n'
        '\n'
        '17.Self-attention BIBREF19, BIBREF20, BIBREF21 has been adapted to text classification, '
        'providing improved interpretability and performance. We used BIBREF20 as the basis of '
        'this benchmark.\n'
        '\n'
        '18.Classification with TF-IDF + Linear SVM (TF-IDF + SVM)\n'
        '\n'
        '19.Bidirectional Encoder Representations from Transformers (BERT) BIBREF11 has achieved '
        'state-of-the-art results on several NLP tasks, including sentence classification.\n'
        '\n'
        '20.Benchmarks ::: Doc2Vec + SVM\n'
        '\n'
        '21.Deep Contextualized Word Representations (ELMo) BIBREF22 have shown recent success '
        'in a number of NLP tasks. The unsupervised nature of the language model allows it to '
        'utilize a large amount of available unlabelled data in order to learn better representations '
        'of words.\n')},
    {"role": "assistant", "content": (
        'TF-IDF + SVM, Depeche + SVM, NRC + SVM, TF-NRC + SVM, Doc2Vec + SVM,  Hierarchical RNN, '
        'BiRNN + Self-Attention, ELMo + BiRNN,  Fine-tuned BERT')},
    {"role": "user", "content": (
        '**Question:**\n'
        'What is the best performance achieved by supervised models?\n'
        '\n'
        '**Context:**\n'
        'Our learning data, which was created in-house, has 20 keywords to be spotted about television '
        'models of a consumer electronics brand. It was collected by making 40 participants utter '
        'each keyword 3 times. Each participant recorded in normal ambient noise conditions. '
        'As a result, after collection of learning data we have 120 (3 x 40) instances of each '
        'of the 20 keywords. We split the learning data 80:20 into train and validation sets. '
        'Train/Validation split was done on speaker level, so as to make sure that all occurrences '
        'of a particular speaker is present only on either of two sets. For testing, we used '
        '10 different 5 minutes long simulated conversational recordings of television salesmen '
        'and customers from a shopping mall in India. These recordings contain background noise '
        '(as is expected in a mall) and have different languages (Indians speak a mixture of '
        'English and Hindi). The CSKS algorithm trained on instances of keywords in learning '
        'data is supposed to detect keywords embedded in conversations of test set.\n')},
    {"role": "assistant", "content": (
        "I don't know.")},
    QUERY_TURN,
)

# ARENA template with abstention
GRACE_ARENA_BASELINE = (
    {"role": "system", "content": (
        'A conversation between User and Assistant. The user asks a question and give some references. '
        'The assistant should answer the question based on the references. \n'
        "User's input will always contain:\n"
        '\n'
        '<question>\n'
        '[The question to answer]\n'
        '</question>\n'
        '\n'
        '<references>\n'
        '[References starting with numbers]\n'
        '</references>\n'
        '\n'
        "Assistant's response must contain EXACTLY three sections if the references are relevant "
        'and useful to the question, otherwise, the assistant should output "The provided evidence '
        'is not enough to answer the question." only.\n'
        '\n'
        '<relevance>\n'
        '[List ONLY reference numbers that provide useful information in square brackets, e.g. '
        '[1,5]]\n'
        '</relevance>\n'
        '\n'
        '<analysis>\n'
        '[Combine information from relevant references to build the answer. Explicitly mention '
        'which references support each claim]\n'
        '</analysis>\n'
        '\n'
        '<answer>\n'
        '[Answer with ONLY a short phrase or single word. No explanations]\n'
        '</answer>')},
    {"role": "user", "content": (
        '<question>\n'
        '{question}\n'
        '</question>\n'
        '\n'
        '<references>\n'
        '{ref}\n'
        '</references>')},
)
