# Test of `kiln train` then `kiln sample`: writes a small text, trains 20 steps (and 3 under bf16
# autocast, and 60 on the text as an llm.c token shard from `kiln tokenize`, whose loss must fall),
# samples 50 characters and checks that exactly 50 were printed. Run with -DKILN=<kiln executable> -DWORK=<scratch dir>.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(text "")
foreach(i RANGE 30)
  string(APPEND text "the quick brown fox jumps over the lazy dog ${i}\n")
endforeach()
file(WRITE ${WORK}/input.txt "${text}")
execute_process(COMMAND ${KILN} train --text ${WORK}/input.txt --steps 20 --out ${WORK}/model
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln train failed (${rc})")
endif()
# the same under bf16 autocast, a few steps
execute_process(COMMAND ${KILN} train --text ${WORK}/input.txt --steps 3 --dtype bf16 --out ${WORK}/model_bf16
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln train --dtype bf16 failed (${rc})")
endif()
execute_process(COMMAND ${KILN} sample --model ${WORK}/model --tokens 50 --seed 3 --top-k 5 --top-p 0.9
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln sample failed (${rc})")
endif()
string(LENGTH "${out}" n)
if(NOT n EQUAL 51)  # 50 characters and the final newline
  message(FATAL_ERROR "kiln sample printed ${n} characters, expected 51: '${out}'")
endif()
message(STATUS "sample: ${out}")
# the same text as an llm.c token shard: `kiln tokenize`, then `kiln train --tokens`; its loss falls
# and the model samples with the vocabulary that came beside the shard
execute_process(COMMAND ${KILN} tokenize --text ${WORK}/input.txt --out ${WORK}/tokens RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT EXISTS ${WORK}/tokens/train.bin OR NOT EXISTS ${WORK}/tokens/vocab.txt)
  message(FATAL_ERROR "kiln tokenize failed (${rc})")
endif()
execute_process(COMMAND ${KILN} train --tokens ${WORK}/tokens/train.bin --steps 60 --out ${WORK}/model_tokens
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln train --tokens failed (${rc}): ${out}")
endif()
string(REGEX MATCH "step +1  loss ([0-9.]+)" first "${out}")
set(first_loss ${CMAKE_MATCH_1})
string(REGEX MATCH "final loss ([0-9.]+)" last "${out}")
set(last_loss ${CMAKE_MATCH_1})
if(NOT first_loss OR NOT last_loss OR NOT last_loss LESS first_loss)
  message(FATAL_ERROR "kiln train --tokens: the loss did not fall (${first_loss} -> ${last_loss}): ${out}")
endif()
message(STATUS "token shard training: loss ${first_loss} -> ${last_loss}")
execute_process(COMMAND ${KILN} sample --model ${WORK}/model_tokens --tokens 20 --seed 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "kiln sample from the token-shard model failed (${rc})")
endif()
# a prompt character the text never had: one line naming it and its code point in hex
execute_process(COMMAND ${KILN} sample --model ${WORK}/model --tokens 5 --prompt "the 日"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^kiln: data::CharTokenizer::encode: character \"日\" [(]U[+]65E5[)] is not in the vocabulary of [0-9]+\n$")
  message(FATAL_ERROR "kiln sample --prompt 'the 日': exit ${rc}, '${err}'")
endif()

# A damaged config.txt is refused before the model is built (n_layer 100000 once grew memory
# without bound), naming the file, the field and its range; a directory given as the text is named.
file(COPY ${WORK}/model/ DESTINATION ${WORK}/bad_model)
file(READ ${WORK}/model/config.txt config)
string(REGEX REPLACE "n_layer [0-9]+" "n_layer 100000" config "${config}")
file(WRITE ${WORK}/bad_model/config.txt "${config}")
execute_process(COMMAND ${KILN} sample --model ${WORK}/bad_model --tokens 5
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "bad_model/config.txt: n_layer 100000 is out of range: an integer in \\[1, 1024\\]")
  message(FATAL_ERROR "kiln sample with n_layer 100000: rc ${rc}, '${err}'")
endif()
execute_process(COMMAND ${KILN} train --text ${WORK} --steps 1 RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "is a directory, not a file")
  message(FATAL_ERROR "kiln train on a directory: rc ${rc}, '${err}'")
endif()
